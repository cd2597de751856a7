package redisbackend

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/limitertest"
)

// TestKindsRegistryFull: a client may choose any number of scales, and the
// registry of kinds holds maxKinds. Full of kinds whose records may still
// live, a record of a new kind is listed in its id's index instead, and
// the admin API finds it there; full of kinds whose records have all
// expired, the registry forgets them and lists the new kind.
func TestKindsRegistryFull(t *testing.T) {
	srv := redistest.Start(t)
	clock := limitertest.NewClock(limitertest.T0)
	ctx := context.Background()
	fill := func(prefix string, until int64) {
		args := []string{"HSET", prefix + ":kinds"}
		for i := range maxKinds {
			args = append(args, field(codeOf(rl.Sliding), int64(1000+i), 0), strconv.FormatInt(until, 10))
		}
		_, err := srv.Do(args...)
		require.NoError(t, err)
	}
	hget := func(key, f string) string {
		out, err := srv.CLI("HGET", key, f)
		require.NoError(t, err)
		return strings.TrimSpace(out)
	}
	hgetalls := func() int64 {
		info, err := srv.CLI("INFO", "commandstats")
		require.NoError(t, err)
		return commandCalls(info)["hgetall"]
	}
	for _, a := range check.Algos {
		t.Run(a.String(), func(t *testing.T) {
			r := millis.Request{ID: "u", Scale: 7_777, Limit: 10, Hits: 1, Algo: a}
			f := field(codeOf(a), r.Scale, subOf(r))

			prefix := "kf" + a.String()
			fill(prefix, limitertest.T0.UnixMilli()+time.Hour.Milliseconds()) // live kinds
			b, err := New(Config{URL: srv.URL(), Prefix: prefix, Clock: clock.Now, Timeout: 5 * time.Second})
			require.NoError(t, err)
			defer b.Close()
			for range 2 {
				_, err = b.checkMS(ctx, r)
				require.NoError(t, err)
			}
			assert.Empty(t, hget(prefix+":kinds", f), "the registry is full")
			assert.NotEmpty(t, hget(b.tag("u")+"i", f), "listed in the id's index")
			// Another new kind within the minute goes to its id's index
			// without asking the full registry again.
			before := hgetalls()
			r2 := r
			r2.Scale = 8_888
			_, err = b.checkMS(ctx, r2)
			require.NoError(t, err)
			assert.Equal(t, before, hgetalls(), "kinds.lua not sent")
			assert.NotEmpty(t, hget(b.tag("u")+"i", field(codeOf(a), r2.Scale, subOf(r2))), "listed in the id's index")
			bs, err := b.Buckets(ctx, "u")
			require.NoError(t, err)
			require.Len(t, bs, 2)
			n, err := b.Reset(ctx, "u", 0)
			require.NoError(t, err)
			assert.Equal(t, 2, n)

			// A batch's checks of a new kind: the registry asked once, every
			// id's record listed in its index.
			prefix = "kb" + a.String()
			fill(prefix, limitertest.T0.UnixMilli()+time.Hour.Milliseconds())
			b3, err := New(Config{URL: srv.URL(), Prefix: prefix, Clock: clock.Now, Timeout: 5 * time.Second})
			require.NoError(t, err)
			defer b3.Close()
			ids := []string{"x", "y", "z"}
			var rs []millis.Request
			for _, id := range ids {
				x := r
				x.ID = id
				rs = append(rs, x)
			}
			before = hgetalls()
			_, err = b3.checkRatesMS(ctx, rs)
			require.NoError(t, err)
			assert.Equal(t, before+1, hgetalls(), "kinds.lua sent once")
			for _, id := range ids {
				assert.NotEmpty(t, hget(b3.tag(id)+"i", f), "%s listed in its index", id)
			}

			prefix = "ke" + a.String()
			fill(prefix, limitertest.T0.UnixMilli()-3*time.Hour.Milliseconds()) // expired kinds (past the test clock's slack)
			b2, err := New(Config{URL: srv.URL(), Prefix: prefix, Clock: clock.Now, Timeout: 5 * time.Second})
			require.NoError(t, err)
			defer b2.Close()
			_, err = b2.checkMS(ctx, r)
			require.NoError(t, err)
			assert.NotEmpty(t, hget(prefix+":kinds", f), "listed, the expired kinds forgotten")
			assert.Empty(t, hget(b2.tag("u")+"i", f), "no index of the id's own")
			bs, err = b2.Buckets(ctx, "u")
			require.NoError(t, err)
			require.Len(t, bs, 1)
		})
	}
}
