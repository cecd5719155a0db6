package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
)

// Conn is the relay's connection to NATS JetStream.
type Conn struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// ConnectOptions tune the connection.
type ConnectOptions struct {
	// Window bounds the publishes awaiting their acknowledgement; a publish beyond it waits.
	Window int
	// AckTimeout fails a publish whose acknowledgement has not come by then.
	AckTimeout time.Duration
	Log        zerolog.Logger
}

// Connect dials NATS at url (one URL or several, comma-separated). A server that does not
// answer is an error at once: a relay that cannot reach NATS marks nothing. Once
// connected, the client reconnects by itself; publishes pending at a disconnect fail and
// their rows are taken again.
func Connect(url string, o ConnectOptions) (*Conn, error) {
	log := o.Log
	nc, err := nats.Connect(url,
		nats.Name("payrecon-relay"),
		nats.Timeout(5*time.Second),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: our own Close
				log.Warn().Err(err).Msg("relay: disconnected from NATS")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info().Str("server", config.RedactURLs(nc.ConnectedUrlRedacted())).Msg("relay: reconnected to NATS")
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", config.RedactURLs(url), err)
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(o.Window),
		jetstream.WithPublishAsyncTimeout(o.AckTimeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("JetStream context: %w", err)
	}
	return &Conn{nc: nc, js: js}, nil
}

// Close drops the connection; publishes still pending fail.
func (c *Conn) Close() { c.nc.Close() }

// JetStream is the JetStream API over the connection.
func (c *Conn) JetStream() jetstream.JetStream { return c.js }

// CheckStream finds the stream that captures the subject of every kind and makes sure its duplicate
// window covers horizon, so that a re-publish after a crash or a lost acknowledgement is
// dropped by the stream instead of stored twice. Both problems are *config.Error: they
// need an operator, not a retry.
func (c *Conn) CheckStream(ctx context.Context, prefix string, kinds []string, horizon time.Duration) (jetstream.StreamInfo, error) {
	var name string
	for _, kind := range kinds {
		subj := prefix + kind
		n, err := c.js.StreamNameBySubject(ctx, subj)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			return jetstream.StreamInfo{}, &config.Error{Setting: "RECONCILER_RELAY_SUBJECT_PREFIX", Msg: fmt.Sprintf(
				"no JetStream stream captures subject %q; create one first (see docs/operations.md), e.g. "+
					"nats stream add PAYRECON_OUTBOX --subjects '%s>' --dupe-window %s ...", subj, prefix, horizon)}
		case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount),
			errors.Is(err, nats.ErrNoResponders): // nobody answers the JetStream API
			return jetstream.StreamInfo{}, &config.Error{Setting: "RECONCILER_RELAY_URL", Msg: "JetStream is not enabled on this NATS server (start it with -js)"}
		case err != nil:
			return jetstream.StreamInfo{}, fmt.Errorf("look up the stream of %s: %w", subj, err)
		case name != "" && n != name:
			return jetstream.StreamInfo{}, &config.Error{Setting: "RECONCILER_RELAY_SUBJECT_PREFIX", Msg: fmt.Sprintf(
				"the subjects under %s are captured by two streams (%s, %s); one stream must hold the whole hand-off", prefix, name, n)}
		}
		name = n
	}
	s, err := c.js.Stream(ctx, name)
	if err != nil {
		return jetstream.StreamInfo{}, fmt.Errorf("stream %s: %w", name, err)
	}
	info := s.CachedInfo()
	if info.Config.Duplicates < horizon {
		return *info, &config.Error{Setting: "RECONCILER_RELAY_RETRY_HORIZON", Msg: fmt.Sprintf(
			"stream %s drops a re-published message only within its duplicate window of %s, shorter than the relay's retry horizon %s: "+
				"a row published again after a crash could be stored twice; raise the window (nats stream edit %s --dupe-window %s) "+
				"or lower RECONCILER_RELAY_RETRY_HORIZON", name, info.Config.Duplicates, horizon, name, horizon)}
	}
	return *info, nil
}
