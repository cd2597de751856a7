package redisbackend

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/limitertest"
)

// TestScriptsKeepTheIndexAhead follows, on the client's clock, when the
// id's index expires (as the scripts ask the client to extend it) and when
// each record does, over checks that keep a record alive for many index
// epochs: the index must never expire first, and must be asked for only a
// few times.
func TestScriptsKeepTheIndexAhead(t *testing.T) {
	srv := redistest.Start(t)
	for _, a := range []rl.Algo{rl.Sliding, rl.Token, rl.Log, rl.Slices, rl.Leaky} {
		for _, scale := range []int64{1000, 10_000, 3_600_000} {
			t.Run(a.String()+"/"+strconv.FormatInt(scale, 10), func(t *testing.T) {
				b, err := New(Config{URL: srv.URL(), Prefix: "ia", Timeout: 5 * time.Second, Clock: func() time.Time { return time.UnixMilli(0) }})
				require.NoError(t, err)
				defer b.Close()
				slack := clockSlack.Milliseconds()
				r := millis.Request{ID: "ahead-" + a.String() + strconv.FormatInt(scale, 10), Scale: scale, Limit: 1 << 20, Hits: 1, Algo: a}
				now := limitertest.T0.UnixMilli() + 7
				var indexExpires, writes int64
				step := scale / 3
				for i := range 200 {
					c := checkCall(b, r, now, now, -1)
					m, err := b.conn().Do(context.Background(), c.build(b.conn(), true)).ToMessage()
					if !rueidis.IsRedisNil(err) {
						require.NoError(t, err)
					}
					_, _, index, err := engines[a].decide(r, answer{msg: m, now: now, slack: slack})
					require.NoError(t, err)
					if index > 0 {
						writes++
						indexExpires = max(indexExpires, now+index-slack)
					}
					var recordExpires int64
					switch a {
					case rl.Sliding:
						recordExpires = (algo.Bucket(now, scale) + 2) * scale
					case rl.Slices:
						n, w, k := algo.SliceOf(now, r)
						recordExpires = (k + n) * w
					case rl.Token, rl.Leaky:
						pttl, err := b.conn().Do(context.Background(), b.conn().B().Pttl().Key(c.key).Build()).AsInt64()
						require.NoError(t, err)
						recordExpires = now + pttl - slack // within a few ms of the real TTL's start
					case rl.Log:
						recordExpires = now + scale
					}
					require.GreaterOrEqual(t, indexExpires, recordExpires, "check %d at %d", i, now)
					now += step
				}
				// A new record, and then once an epoch (a minute, or the
				// scale), give or take one.
				epoch := max(scale, 60_000)
				require.LessOrEqual(t, writes, 2+200*step/epoch, "index writes")
			})
		}
	}
}

// TestIndexTTL: the index is asked for only when a record is new or its
// expiry passes into another epoch (a minute, or the scale when longer),
// and then until the end of the expiry's epoch, plus the slack.
func TestIndexTTL(t *testing.T) {
	const m = 60_000
	for _, tc := range []struct {
		name                            string
		scale, now, was, expires, slack int64
		isNew                           bool
		want                            int64
	}{
		{"new", 1000, 10*m + 5, 0, 10*m + 1005, 0, true, 11*m - (10*m + 5)},
		{"same epoch", 1000, 10*m + 5, 10*m + 500, 10*m + 1005, 0, false, 0},
		{"next epoch", 1000, 11*m - 100, 11*m - 10, 11*m + 900, 0, false, 12*m - (11*m - 100)},
		{"slack", 1000, 11*m - 100, 11*m - 10, 11*m + 900, 2000, false, 12*m - (11*m - 100) + 2000},
		{"an hour's scale: hour epochs", 3_600_000, 5, 7_200_000, 7_200_001, 0, false, 0},
		{"an hour's scale, next", 3_600_000, 5, 7_199_999, 7_200_001, 0, false, 10_800_000 - 5},
	} {
		assert.Equal(t, tc.want, indexTTL(tc.scale, tc.now, tc.was, tc.expires, tc.slack, tc.isNew), tc.name)
	}
}

// TestAnswerRecord reads the scripts' answers: the record alone on the
// client's clock (nil: none), led by Redis's time when the script read
// TIME; anything else is an error, never a record.
func TestAnswerRecord(t *testing.T) {
	srv := redistest.Start(t)
	b, err := New(Config{URL: srv.URL(), Prefix: "ar", Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer b.Close()
	c := b.conn()
	msg := func(s string, isNil bool) rueidis.RedisMessage {
		t.Helper()
		var cmd rueidis.Completed
		if isNil {
			cmd = c.B().Get().Key("ar-none").Build()
		} else {
			cmd = c.B().Echo().Message(s).Build()
		}
		m, err := c.Do(context.Background(), cmd).ToMessage()
		if !isNil {
			require.NoError(t, err)
		}
		return m
	}
	rec := packArgs(3, 7, 5, 0, 0, 0)
	for _, tc := range []struct {
		name   string
		a      answer
		now    int64
		record []int64
		ok     bool
		err    bool
	}{
		{"no record", answer{msg: msg("", true), now: 100}, 100, nil, false, false},
		{"a record", answer{msg: msg(rec, false), now: 100}, 100, []int64{3, 7, 5, 0, 0, 0}, true, false},
		{"timed, no record", answer{msg: msg(packArgs(99), false), now: 100, timed: true}, 99, nil, false, false},
		{"timed, a record", answer{msg: msg(packArgs(99)+rec, false), now: 100, timed: true}, 99, []int64{3, 7, 5, 0, 0, 0}, true, false},
		{"timed without a time", answer{msg: msg("", true), now: 100, timed: true}, 0, nil, false, true},
		{"short", answer{msg: msg(rec[:40], false), now: 100}, 0, nil, false, true},
		{"timed, short time", answer{msg: msg("1234", false), now: 100, timed: true}, 0, nil, false, true},
	} {
		now, v, ok, err := tc.a.record(6)
		if tc.err {
			assert.Error(t, err, tc.name)
			assert.False(t, ok, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.now, now, tc.name)
		assert.Equal(t, tc.record, v, tc.name)
		assert.Equal(t, tc.ok, ok, tc.name)
	}
}
