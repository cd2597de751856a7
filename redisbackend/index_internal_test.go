package redisbackend

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/algo"
	"github.com/raterlimiter/raterlimiter/internal/redistest"
	"github.com/raterlimiter/raterlimiter/limitertest"
)

// TestScriptsKeepTheIndexAhead follows, on the client's clock, when the
// id's index expires (as the scripts ask the client to extend it) and when
// each record does, over checks that keep a record alive for many index
// epochs: the index must never expire first, and must be asked for only a
// few times.
func TestScriptsKeepTheIndexAhead(t *testing.T) {
	srv := redistest.Start(t)
	for _, a := range []rl.Algo{rl.Sliding, rl.Token, rl.Log} {
		for _, scale := range []int64{1000, 10_000, 3_600_000} {
			t.Run(a.String()+"/"+strconv.FormatInt(scale, 10), func(t *testing.T) {
				b, err := New(Config{URL: srv.URL(), Prefix: "ia", Timeout: 5 * time.Second, Clock: func() int64 { return 0 }})
				require.NoError(t, err)
				defer b.Close()
				slack := clockSlack.Milliseconds()
				r := rl.Request{ID: "ahead-" + a.String() + strconv.FormatInt(scale, 10), Scale: scale, Limit: 1 << 20, Hits: 1, Algo: a}
				now := int64(limitertest.T0) + 7
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
					case rl.Token:
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
