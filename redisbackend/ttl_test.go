package redisbackend_test

import (
	"context"
	"encoding/base64"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// TestTTL: every key expires at the end of the last window that can read it,
// and a little later (two seconds) when the client's clock decides, as
// sidecars' clocks disagree by a little; the registry of kinds lists a
// record's kind for no less. With Config.Deadlines the scripts decide on Redis's clock and
// their records need no such slack; fixed windows' counters, named by the
// client's clock, keep it.
func TestTTL(t *testing.T) {
	srv := redistest.Start(t)
	pttl := func(key string) int64 {
		reply, err := srv.Do("PTTL", key)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(reply, ":"), reply)
		n, err := strconv.ParseInt(reply[1:], 10, 64)
		require.NoError(t, err)
		return n
	}
	const scale = 60_000
	const slackMS = 1000 // time between the check and reading the TTL, on a busy machine
	tests := []struct {
		name string
		algo rl.Algo
		key  func(d millis.Decision) string // after the id's tag
		hits int64
		// the TTL must lie in [lo, hi] ms, before the slack, given d (the
		// decision)
		bounds func(d millis.Decision) (lo, hi int64)
	}{
		{"fixed: the window's end", rl.Fixed, func(d millis.Decision) string { return "f:60000:" + strconv.FormatInt(d.Now/scale, 10) }, 1,
			func(d millis.Decision) (int64, int64) { return d.ResetMS - slackMS, d.ResetMS }},
		{"sliding: one window later", rl.Sliding, func(millis.Decision) string { return "w:60000" }, 1,
			func(d millis.Decision) (int64, int64) { return d.ResetMS + scale - slackMS, d.ResetMS + scale }},
		{"token: when full again, rounded up to scale/8", rl.Token, func(millis.Decision) string { return "g:60000" }, 3,
			func(d millis.Decision) (int64, int64) { return d.ResetMS - slackMS, d.ResetMS + scale/8 }},
		{"log: when its newest hit leaves", rl.Log, func(millis.Decision) string { return "l:60000" }, 1,
			func(d millis.Decision) (int64, int64) { return scale - slackMS, scale }},
		{"slices: when its newest slice leaves", rl.Slices, func(millis.Decision) string { return "n:60000:60" }, 1,
			func(d millis.Decision) (int64, int64) { return d.ResetMS - slackMS, d.ResetMS }},
		{"leaky: when the queue has drained, rounded up to scale/8", rl.Leaky, func(millis.Decision) string { return "k:60000" }, 3,
			func(d millis.Decision) (int64, int64) { return d.ResetMS - slackMS, d.ResetMS + scale/8 }},
	}
	for _, deadlines := range []bool{false, true} {
		prefix := "ttl" + strconv.FormatBool(deadlines)
		b, err := redisbackend.New(redisbackend.Config{URL: srv.URL(), Prefix: prefix, Timeout: 2 * time.Second, Deadlines: deadlines})
		require.NoError(t, err)
		defer b.Close()
		for _, tt := range tests {
			t.Run(prefix+"/"+tt.name, func(t *testing.T) {
				id := "ttl-" + tt.algo.String()
				d, err := checkMS(context.Background(), b, millis.Request{ID: id, Scale: scale, Limit: 10, Hits: tt.hits, Algo: tt.algo})
				require.NoError(t, err)
				tag := prefix + ":{" + base64.RawURLEncoding.EncodeToString([]byte(id)) + "}:"
				lo, hi := tt.bounds(d)
				if !deadlines || tt.algo == rl.Fixed {
					lo, hi = lo+2000, hi+2000
				}
				// The registry is read first: the record's TTL, read later,
				// can only have shrunk since, so however slow the machine,
				// a kind listed as long as its record lives reads no less.
				field := tt.key(d) // a record's key after the tag is its kind's field ...
				if tt.algo == rl.Fixed {
					field = "f:60000" // ... but for a fixed window's number
				}
				index := listedUntil(t, srv, prefix, field) - d.Now
				got := pttl(tag + tt.key(d))
				assert.GreaterOrEqual(t, got, lo, "record TTL")
				assert.LessOrEqual(t, got, hi, "record TTL")
				assert.GreaterOrEqual(t, index, got, "the kind is listed as long as its records live")
			})
		}
	}
}

// TestIndexOutlivesRecords: a backend lists a record's kind in the registry
// of kinds when it writes a record that may outlive the kind's listing, for
// ten minutes more: a record kept alive for many epochs by its checks stays
// listed, no id gets an index of its own while the registry has room, and a
// run of checks within one epoch writes the registry at most once. (That the
// scripts ask for the listing whenever a record may outlive it, on the
// scripts' clock, is TestScriptsKeepTheIndexAhead's.)
func TestIndexOutlivesRecords(t *testing.T) {
	srv := redistest.Start(t)
	const scale = 10_000
	for _, a := range []rl.Algo{rl.Fixed, rl.Sliding, rl.Token, rl.Slices, rl.Leaky} {
		t.Run(a.String(), func(t *testing.T) {
			clock := limitertest.NewClock(limitertest.T0.Add(time.Millisecond))
			prefix := "ix" + a.String()
			b, err := redisbackend.New(redisbackend.Config{URL: srv.URL(), Prefix: prefix, Clock: clock.Now, Timeout: 2 * time.Second})
			require.NoError(t, err)
			defer b.Close()
			pttl := func(key string) int64 {
				reply, err := srv.Do("PTTL", key)
				require.NoError(t, err)
				n, err := strconv.ParseInt(strings.TrimPrefix(reply, ":"), 10, 64)
				require.NoError(t, err)
				return n
			}
			hsets := func() int64 {
				info, err := srv.CLI("INFO", "commandstats")
				require.NoError(t, err)
				m := regexp.MustCompile(`cmdstat_hset:calls=(\d+)`).FindStringSubmatch(info)
				if m == nil {
					return 0
				}
				n, _ := strconv.ParseInt(m[1], 10, 64)
				return n
			}
			tag := prefix + ":{" + base64.RawURLEncoding.EncodeToString([]byte("u")) + "}:"
			r := millis.Request{ID: "u", Scale: scale, Limit: 1_000_000, Hits: 1, Algo: a}
			ctx := context.Background()
			// Ten minutes of checks, one every 5 s: many epochs.
			for i := range 120 {
				d, err := checkMS(ctx, b, r)
				require.NoError(t, err)
				require.True(t, d.Allowed)
				field := map[rl.Algo]string{rl.Fixed: "f:10000", rl.Sliding: "w:10000", rl.Token: "g:10000", rl.Slices: "n:10000:60", rl.Leaky: "k:10000"}[a]
				key := tag + field
				if a == rl.Fixed {
					key = tag + "f:10000:" + strconv.FormatInt(clock.Now().UnixMilli()/scale, 10)
				}
				// The registry is read first: the record's TTL, read later,
				// can only have shrunk since. The registry lists the kind
				// until a time on the client's clock.
				index := listedUntil(t, srv, prefix, field) - clock.Now().UnixMilli()
				rec := pttl(key)
				require.Positive(t, rec, "check %d: the record", i)
				require.GreaterOrEqual(t, index, rec, "check %d: the kind is listed as long as the record lives", i)
				idx, err := srv.Do("EXISTS", tag+"i")
				require.NoError(t, err)
				require.Equal(t, ":0", idx, "check %d: no index per id while the registry has room", i)
				if i%40 == 0 {
					bs, err := b.Buckets(ctx, "u")
					require.NoError(t, err)
					require.NotEmpty(t, bs, "check %d: listed", i)
				}
				clock.Advance(time.Duration(5000) * time.Millisecond)
			}
			// A hundred checks within one epoch write the registry at most
			// once (the epoch may turn among them): a fixed window's new
			// counters too.
			before := hsets()
			for range 100 {
				_, err := checkMS(ctx, b, r)
				require.NoError(t, err)
				clock.Advance(time.Duration(100) * time.Millisecond)
			}
			assert.LessOrEqual(t, hsets()-before, int64(1), "registry writes")
		})
	}
}

// listedUntil reads until when the registry of kinds of prefix lists the
// kind field (the client's clock, Unix ms).
func listedUntil(t *testing.T, srv *redistest.Server, prefix, field string) int64 {
	t.Helper()
	out, err := srv.CLI("HGET", prefix+":kinds", field)
	require.NoError(t, err)
	u, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	require.NoError(t, err, "%s is listed: %q", field, out)
	return u
}
