package platformclient

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/payrecon/payrecon/reconcile"
)

// Yuan is an amount in fen read from a JSON yuan value. The platforms' documentation shows
// JSON numbers (88.88) while real answers carry strings ("88.88"): both are accepted, and a
// number is handed to reconcile.ParseYuan as its literal text, never through float64. A JSON
// null leaves the amount at zero ("the platform did not say").
type Yuan int64

// UnmarshalJSON implements json.Unmarshaler on the raw token.
func (y *Yuan) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	text := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &text); err != nil {
			return fmt.Errorf("%w: %v", reconcile.ErrAmount, err)
		}
	}
	fen, err := reconcile.ParseYuan(text)
	if err != nil {
		return err
	}
	*y = Yuan(fen)
	return nil
}

// MarshalJSON writes the amount as a yuan string, the form real answers use.
func (y Yuan) MarshalJSON() ([]byte, error) {
	return json.Marshal(reconcile.FormatYuan(int64(y)))
}
