// Package repotest gives each test its own real PostgreSQL database (cloned from a migrated
// template) and its own Redis key prefix, so tests run in parallel, in several packages at
// once, and twice in a row without sharing state. A missing server fails the test with the
// fix to apply: integration tests never skip.
package repotest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/redis/go-redis/v9"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/repo/postgres"
)

// DefaultDatabaseURL and DefaultRedisURL are used when the RECONCILER_TEST_* variables are
// unset: the standard local ports.
const (
	DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	DefaultRedisURL    = "redis://127.0.0.1:6379/0"
)

const templateLockKey = 0x74706c74 // "tplt"

// AdminURL is the server-level PostgreSQL URL tests create their databases from.
func AdminURL() string {
	if u := os.Getenv("RECONCILER_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultDatabaseURL
}

// RedisURL is the Redis server tests use.
func RedisURL() string {
	if u := os.Getenv("RECONCILER_TEST_REDIS_URL"); u != "" {
		return u
	}
	return DefaultRedisURL
}

const howToFix = "run the tests with `make test` (it starts private PostgreSQL and Redis servers when none answer), " +
	"or point RECONCILER_TEST_DATABASE_URL / RECONCILER_TEST_REDIS_URL at running servers"

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// template makes sure the migrated template database exists, once per process; its name
// carries a hash of the migrations, so a schema change gets a fresh template.
func template(ctx context.Context) (string, error) {
	templateOnce.Do(func() {
		migs, err := postgres.Migrations()
		if err != nil {
			templateErr = err
			return
		}
		h := sha256.New()
		for _, m := range migs {
			h.Write([]byte(m.Version + "\x00" + m.SQL + "\x00"))
		}
		templateName = "payrecon_tmpl_" + hex.EncodeToString(h.Sum(nil))[:16]
		templateErr = buildTemplate(ctx, templateName)
	})
	return templateName, templateErr
}

func buildTemplate(ctx context.Context, name string) error {
	admin, err := sqlx.Open("postgres", AdminURL())
	if err != nil {
		return err
	}
	defer admin.Close()
	var conn *sqlx.Conn
	err = whileServerFull(ctx, func() (err error) { conn, err = admin.Connx(ctx); return err })
	if err != nil {
		return fmt.Errorf("PostgreSQL not reachable at %s: %w\n%s", config.RedactURL(AdminURL()), err, howToFix)
	}
	defer conn.Close()
	// Test binaries of several packages run at once: one builds, the others wait.
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, templateLockKey); err != nil {
		return fmt.Errorf("lock template: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, templateLockKey) //nolint:errcheck
	var exists bool
	if err := conn.GetContext(ctx, &exists, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name); err != nil {
		return fmt.Errorf("look up template: %w", err)
	}
	if exists {
		return nil
	}
	building := name + "_build"
	if _, err := conn.ExecContext(ctx, `DROP DATABASE IF EXISTS `+pq.QuoteIdentifier(building)+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop stale template build: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `CREATE DATABASE `+pq.QuoteIdentifier(building)); err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	db, err := postgres.Open(ctx, urlForDatabase(AdminURL(), building))
	if err != nil {
		return err
	}
	_, err = postgres.Migrate(ctx, db)
	db.Close()
	if err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	// Renamed only once complete, so a crashed build never leaves a half-migrated template.
	if _, err := conn.ExecContext(ctx, `ALTER DATABASE `+pq.QuoteIdentifier(building)+` RENAME TO `+pq.QuoteIdentifier(name)); err != nil {
		return fmt.Errorf("publish template: %w", err)
	}
	return nil
}

// DB is one test's private database.
type DB struct {
	*sqlx.DB
	Name string
	URL  string
}

// NewDB creates a migrated database for this test alone and drops it when the test ends.
func NewDB(t testing.TB) *DB {
	t.Helper()
	// Generous: with every package's tests at once the server can be full for a while.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tmpl, err := template(ctx)
	if err != nil {
		t.Fatalf("test database: %v", err)
	}
	name := "payrecon_test_" + randomHex(8)
	admin, err := sqlx.Open("postgres", AdminURL())
	if err != nil {
		t.Fatalf("test database: %v", err)
	}
	defer admin.Close()
	for attempt := 0; ; attempt++ {
		_, err = admin.ExecContext(ctx, `CREATE DATABASE `+pq.QuoteIdentifier(name)+` TEMPLATE `+pq.QuoteIdentifier(tmpl))
		var pqErr *pq.Error
		// 55006: the template is being accessed (another clone is in progress); 53300: the
		// server is full (other packages' tests): wait a bit.
		if err != nil && errors.As(err, &pqErr) && (pqErr.Code == "55006" || pqErr.Code == "53300") && attempt < 600 && ctx.Err() == nil {
			time.Sleep(time.Duration(20+attempt*5) * time.Millisecond)
			continue
		}
		break
	}
	if err != nil {
		t.Fatalf("create test database (%s): %v\n%s", config.RedactURL(AdminURL()), err, howToFix)
	}
	u := urlForDatabase(AdminURL(), name)
	var db *sqlx.DB
	err = whileServerFull(ctx, func() (err error) { db, err = postgres.Open(ctx, u); return err })
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	// Parallel tests of several packages share one server: a test keeps few idle sessions.
	db.SetMaxIdleConns(2)
	t.Cleanup(func() {
		db.Close()
		admin, err := sqlx.Open("postgres", AdminURL())
		if err != nil {
			return
		}
		defer admin.Close()
		if _, err := admin.Exec(`DROP DATABASE IF EXISTS ` + pq.QuoteIdentifier(name) + ` WITH (FORCE)`); err != nil {
			t.Logf("drop test database %s: %v", name, err)
		}
	})
	return &DB{DB: db, Name: name, URL: u}
}

// Redis is one test's Redis client and key prefix.
type Redis struct {
	Client *redis.Client
	URL    string
	// Prefix is unique to the test; use it as the claim prefix.
	Prefix string
}

// NewRedis connects to the test Redis and deletes the test's keys when it ends.
func NewRedis(t testing.TB) *Redis {
	t.Helper()
	opt, err := redis.ParseURL(RedisURL())
	if err != nil {
		t.Fatalf("RECONCILER_TEST_REDIS_URL: %v", err)
	}
	c := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		t.Fatalf("Redis not reachable at %s: %v\n%s", config.RedactURL(RedisURL()), err, howToFix)
	}
	prefix := "test:" + randomHex(6) + ":pay:notify:"
	t.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		c.Close()
	})
	return &Redis{Client: c, URL: RedisURL(), Prefix: prefix}
}

func urlForDatabase(admin, name string) string {
	u, err := url.Parse(admin)
	if err != nil {
		return admin
	}
	u.Path = "/" + name
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return strings.ToLower(hex.EncodeToString(b))
}

// whileServerFull runs connect again while PostgreSQL answers 53300 (too many clients): the
// packages' test binaries run at once and share one server, so a full server is a wait, not
// a failure. Any other error, or ctx ending, returns.
func whileServerFull(ctx context.Context, connect func() error) error {
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		err := connect()
		var pqErr *pq.Error
		if err == nil || !errors.As(err, &pqErr) || pqErr.Code != "53300" {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
	}
}
