package redisbackend_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// withPassword puts a password into a redis:// or rediss:// URL.
func withPassword(u, password string) string {
	scheme, rest, _ := strings.Cut(u, "://")
	return scheme + "://:" + url.QueryEscape(password) + "@" + rest
}

// TestURL connects as the URL says: a password, TLS (rediss://), and refuses
// what it must.
func TestURL(t *testing.T) {
	const password = "s3cr:t@/pw"
	plain := redistest.Start(t, "--requirepass", password)
	secure := redistest.StartTLS(t, "--requirepass", password)
	r := rl.Request{ID: "u", Scale: time.Minute, Limit: 2, Hits: 1}
	tests := []struct {
		name    string
		cfg     redisbackend.Config
		wantErr string
	}{
		{"password", redisbackend.Config{URL: withPassword(plain.URL(), password)}, ""},
		{"wrong password", redisbackend.Config{URL: withPassword(plain.URL(), "nope")}, "WRONGPASS"},
		{"no password", redisbackend.Config{URL: plain.URL()}, "NOAUTH"},
		{"tls and password", redisbackend.Config{URL: withPassword(secure.URL(), password), TLS: secure.ClientTLS()}, ""},
		{"tls, server not trusted", redisbackend.Config{URL: withPassword(secure.URL(), password)}, "certificate"},
		{"plain to a tls port", redisbackend.Config{URL: "redis://" + secure.Addr() + "/0", Timeout: 200 * time.Millisecond}, "redisbackend: connect"},
		{"bad scheme", redisbackend.Config{URL: "http://" + plain.Addr()}, "scheme"},
		{"prefix with a brace", redisbackend.Config{URL: plain.URL(), Prefix: "a{b"}, "prefix"},
		{"local without a fallback", redisbackend.Config{URL: plain.URL(), Fail: rl.FailLocal}, "fallback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cfg.Timeout == 0 {
				tt.cfg.Timeout = 2 * time.Second // about URLs, not timeouts: the machine is shared
			}
			b, err := redisbackend.New(tt.cfg)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			defer b.Close()
			d, err := b.CheckRate(context.Background(), r)
			require.NoError(t, err)
			assert.True(t, d.Allowed)
			assert.Equal(t, int64(1), d.Count)
			require.NoError(t, b.Ping(context.Background()))
		})
	}
}

// TestNoFallback: FailLocal without a Fallback is a Config New cannot use,
// refused before any Redis is dialled with an error matching
// raterlimiter.ErrInvalid that names the field.
func TestNoFallback(t *testing.T) {
	b, err := redisbackend.New(redisbackend.Config{URL: "redis://127.0.0.1:1/0", Fail: rl.FailLocal})
	require.Error(t, err)
	assert.Nil(t, b)
	assert.ErrorIs(t, err, rl.ErrInvalid)
	var fe *rl.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "Fallback", fe.Field)
	assert.NotErrorIs(t, err, rl.ErrUnavailable)
}

func TestClose(t *testing.T) {
	srv := redistest.Start(t)
	b, err := redisbackend.New(redisbackend.Config{URL: srv.URL(), Fail: rl.FailOpen, Timeout: 2 * time.Second})
	require.NoError(t, err)
	require.NoError(t, b.Close())
	require.NoError(t, b.Close(), "idempotent")
	ctx := context.Background()
	_, err = b.CheckRate(ctx, rl.Request{ID: "u", Scale: time.Second, Limit: 1, Hits: 1})
	assert.ErrorIs(t, err, rl.ErrClosed, "not a fail-open answer")
	_, err = b.CheckRates(ctx, []rl.Request{{ID: "u", Scale: time.Second, Limit: 1, Hits: 1}})
	assert.ErrorIs(t, err, rl.ErrClosed)
	_, err = b.Buckets(ctx, "u")
	assert.ErrorIs(t, err, rl.ErrClosed)
	_, err = b.Reset(ctx, "u", 0)
	assert.ErrorIs(t, err, rl.ErrClosed)
	assert.ErrorIs(t, b.Ping(ctx), rl.ErrClosed)
}
