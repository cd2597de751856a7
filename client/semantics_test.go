package client_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/client"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

// testTimeout bounds calls to a real sidecar: generous, since -race on a
// loaded 2-core machine can stall a first request for a second.
const testTimeout = 30 * time.Second

// sidecar serves the real API over lim on a loopback port the OS picks and
// returns its URL; the test's cleanup shuts it down.
func sidecar(t testing.TB, lim rl.Limiter, token string) string {
	t.Helper()
	return tooltest.Serve(t, api.Config{Limiter: lim, AdminToken: token})
}

// clientOf returns a client of the sidecar at url configured by cfg (its
// Timeout testTimeout unless set); the test's cleanup closes it.
func clientOf(t testing.TB, url string, cfg client.Config) *client.Client {
	t.Helper()
	cfg.URL = url
	if cfg.Timeout == 0 {
		cfg.Timeout = testTimeout
	}
	c, err := client.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSemantics runs the shared table against the client talking to a real
// sidecar whose embedded limiter keeps the table's clock.
func TestSemantics(t *testing.T) {
	limitertest.Run(t, func(t *testing.T, clock *limitertest.Clock) rl.Limiter {
		lim := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1})
		t.Cleanup(func() { lim.Close() })
		return clientOf(t, sidecar(t, lim, "admin-secret"), client.Config{AdminToken: "admin-secret", Clock: clock.Now})
	})
}

// TestSidecarErrors checks the errors the client rebuilds from the real
// sidecar's answers, bypassing the local validation by using a client whose
// limit on ids is above the sidecar's.
func TestSidecarErrors(t *testing.T) {
	lim := memory.New(memory.Config{SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	url := sidecar(t, lim, "T")
	long := string(make([]byte, check.DefaultMaxIDBytes+1))
	ctx := context.Background()

	lax := clientOf(t, url, client.Config{MaxIDBytes: 4 * check.DefaultMaxIDBytes})
	_, err := lax.CheckRate(ctx, rl.Request{ID: long, Scale: time.Second, Limit: 1, Hits: 1})
	var fe *rl.FieldError
	require.ErrorAs(t, err, &fe, "the sidecar's 400 comes back as a FieldError: %v", err)
	assert.Equal(t, "id", fe.Field)
	assert.ErrorIs(t, err, rl.ErrInvalid)

	_, err = lax.CheckRates(ctx, []rl.Request{{ID: "a", Scale: time.Millisecond, Hits: 1}, {ID: long, Scale: time.Millisecond, Hits: 1}})
	var ie *rl.ItemError
	require.ErrorAs(t, err, &ie, "the sidecar's batch 400 comes back as an ItemError: %v", err)
	assert.Equal(t, 1, ie.Index)
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "id", fe.Field)

	tooMany := make([]rl.Request, 1000+1) // one past the sidecar's -max-batch
	for i := range tooMany {
		tooMany[i] = rl.Request{ID: "a", Scale: time.Second, Limit: 1}
	}
	_, err = lax.CheckRates(ctx, tooMany)
	var ce *client.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 413, ce.Status)
	assert.ErrorIs(t, err, rl.ErrInvalid)

	_, err = lax.Buckets(ctx, "a")
	require.ErrorAs(t, err, &ce, "no admin token")
	assert.Equal(t, 401, ce.Status)
	assert.False(t, errors.Is(err, rl.ErrUnavailable) || errors.Is(err, rl.ErrInvalid))
}

// TestIDsOfAnyBytes sends ids holding every byte value through every call
// of the client to a real sidecar and reads them back.
func TestIDsOfAnyBytes(t *testing.T) {
	lim := memory.New(memory.Config{SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	c := clientOf(t, sidecar(t, lim, ""), client.Config{})
	ctx := context.Background()
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	ids := []string{string(all), "+", " ", "%2B", "a=b&c=d", "\x00", "\xff\xfe", "é", "#frag", "?q"}
	for _, id := range ids {
		t.Run(strconv.Quote(id), func(t *testing.T) {
			for want := int64(1); want <= 2; want++ {
				d, err := c.CheckRate(ctx, rl.Request{ID: id, Scale: time.Minute, Limit: 5, Hits: 1})
				require.NoError(t, err)
				assert.Equal(t, want, d.Count)
			}
			direct, err := lim.Buckets(ctx, id)
			require.NoError(t, err)
			require.Len(t, direct, 1, "the sidecar stored the id byte for byte")
			bs, err := c.Buckets(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, direct, bs)
			n, err := c.Reset(ctx, id, 0)
			require.NoError(t, err)
			assert.Equal(t, 1, n)
		})
	}
	t.Run("batch of UTF-8 ids", func(t *testing.T) {
		rs := []rl.Request{{ID: "é\"\\\u2028", Scale: time.Second, Limit: 5, Hits: 1}, {ID: "\x01\x1f", Scale: time.Second, Limit: 5, Hits: 2}}
		ds, err := c.CheckRates(ctx, rs)
		require.NoError(t, err)
		assert.Equal(t, []int64{1, 2}, []int64{ds[0].Count, ds[1].Count})
		for _, r := range rs {
			bs, err := lim.Buckets(ctx, r.ID)
			require.NoError(t, err)
			assert.Len(t, bs, 1, "%q arrived intact", r.ID)
		}
	})
}

// TestBucketsFollowsPages: the sidecar answers /buckets two records a page;
// the client gathers them all, in order.
func TestBucketsFollowsPages(t *testing.T) {
	lim := memory.New(memory.Config{SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	c := clientOf(t, tooltest.Serve(t, api.Config{Limiter: lim, BucketsPage: 2}), client.Config{})
	ctx := context.Background()
	for scale := time.Second; scale <= 5*time.Second; scale += time.Second {
		_, err := c.CheckRate(ctx, rl.Request{ID: "p", Scale: scale, Limit: 5, Hits: 1})
		require.NoError(t, err)
	}
	bs, err := c.Buckets(ctx, "p")
	require.NoError(t, err)
	require.Len(t, bs, 5)
	for i, b := range bs {
		assert.Equal(t, time.Duration(i+1)*time.Second, b.Scale, strconv.Itoa(i))
	}
}

// TestIDsThatAreNotUTF8RoundTrip: the client sends any bytes as an id and
// the sidecar counts "\xff" and "\xfe" apart (its answers carry them as
// id_b64).
func TestIDsThatAreNotUTF8RoundTrip(t *testing.T) {
	lim := memory.New(memory.Config{SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	c := clientOf(t, sidecar(t, lim, ""), client.Config{})
	ctx := context.Background()
	for _, id := range []string{"\xff", "\xfe"} {
		d, err := c.CheckRate(ctx, rl.Request{ID: id, Scale: time.Minute, Limit: 1, Hits: 1})
		require.NoError(t, err)
		assert.True(t, d.Allowed, "%q: its own counter", id)
	}
	d, err := c.CheckRate(ctx, rl.Request{ID: "\xff", Scale: time.Minute, Limit: 1, Hits: 1})
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	bs, err := c.Buckets(ctx, "\xfe")
	require.NoError(t, err)
	require.Len(t, bs, 1)
	assert.EqualValues(t, 1, bs[0].Count)
}
