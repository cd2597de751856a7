package actor_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/actor"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// TestMailboxCountsExactlyTheAnsweredChecks: many callers on a few ids,
// some of whom give up at random (contexts cancelled before, during and
// after the wait), with a mailbox small enough that callers also wait for
// room. Every check answered without an error is counted once, and no check
// answered with an error is counted: the count each id ends with is the
// number of successful checks of it.
func TestMailboxCountsExactlyTheAnsweredChecks(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for _, mailbox := range []int{4, 0} {
		t.Run(fmt.Sprintf("mailbox=%d", mailbox), func(t *testing.T) {
			a := newActor(t, actor.Config{Mailbox: mailbox})
			const (
				callers = 64
				checks  = 200
				ids     = 5
			)
			var ok [ids]atomic.Int64
			var wg sync.WaitGroup
			for c := range callers {
				r := rand.New(rand.NewPCG(seed, uint64(c)))
				wg.Go(func() {
					for range checks {
						id := r.IntN(ids)
						ctx, cancel := context.WithCancel(context.Background())
						switch r.IntN(4) {
						case 0:
							cancel() // gave up before sending
						case 1:
							go cancel() // gives up while it waits, or not
						}
						req := hit(fmt.Sprint("id", id))
						req.Limit = 1 << 30
						_, err := a.CheckRate(ctx, req)
						cancel()
						if err == nil {
							ok[id].Add(1)
						} else if !errors.Is(err, rl.ErrUnavailable) {
							t.Errorf("unexpected error: %v", err)
						}
					}
				})
			}
			wg.Wait()
			for id := range ids {
				assert.Equal(t, ok[id].Load(), count(t, a, fmt.Sprint("id", id)), "id%d (seed %d)", id, seed)
			}
		})
	}
}

// TestCloseWhileCallersSend: callers that send while the actor closes are
// each answered, either decided or with raterlimiter.ErrClosed, and none
// hangs.
func TestCloseWhileCallersSend(t *testing.T) {
	a := actor.New(actor.Config{Clock: func() int64 { return t0 }, Mailbox: 8})
	var wg sync.WaitGroup
	var answered, closed atomic.Int64
	for range 32 {
		wg.Go(func() {
			for {
				_, err := a.CheckRate(context.Background(), hit("u"))
				answered.Add(1)
				if err != nil {
					require.ErrorIs(t, err, rl.ErrClosed)
					closed.Add(1)
					return
				}
			}
		})
	}
	for answered.Load() < 1000 {
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, a.Close())
	wg.Wait()
	assert.Equal(t, int64(32), closed.Load(), "every caller learnt that the actor closed")
}

// TestFloodPastTheLimitCountsExactly: many callers flood a few ids past
// their limit; exactly the limit is allowed per id, and every hit is
// counted, the denied ones included (a fixed window counts them).
func TestFloodPastTheLimitCountsExactly(t *testing.T) {
	a := newActor(t, actor.Config{})
	const (
		callers = 64
		checks  = 300
		ids     = 3
		limit   = 100
	)
	var allowed [ids]atomic.Int64
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range checks {
				id := (c + i) % ids
				d, err := a.CheckRate(context.Background(), millis.Request{ID: fmt.Sprint("id", id), Scale: 60_000, Limit: limit, Hits: 1})
				if !assert.NoError(t, err) {
					return
				}
				if d.Allowed {
					allowed[id].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for id := range ids {
		assert.Equal(t, int64(limit), allowed[id].Load(), "id%d", id)
		d, err := a.CheckRate(waitCtx(t), millis.Request{ID: fmt.Sprint("id", id), Scale: 60_000, Limit: limit})
		require.NoError(t, err)
		assert.Equal(t, int64(callers*checks/ids), d.Count, "id%d: every hit counted", id)
	}
}
