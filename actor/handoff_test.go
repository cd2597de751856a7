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
	"github.com/raterlimiter/raterlimiter/buckets"
)

// hold runs a function message on a that blocks until release is called
// (or the test ends); held is closed once the actor runs it.
func hold(t *testing.T, a *actor.Actor) (held chan struct{}, release func(), done chan error) {
	held, stop, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	release = sync.OnceFunc(func() { close(stop) })
	t.Cleanup(release) // before the actor's Close, which waits for it
	go func() {
		done <- a.Do(context.Background(), func(*buckets.Store, int64) {
			close(held)
			<-stop
		})
	}()
	return held, release, done
}

// waitPending waits until a's mailbox holds at least n messages, failing
// the test after 10 s.
func waitPending(t *testing.T, a *actor.Actor, n int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); a.Pending() < n; {
		if time.Now().After(end) {
			t.Fatalf("the mailbox holds %d messages, not %d", a.Pending(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// within waits for ch, failing the test after 10 s (a hang, not a time
// measured).
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no answer in 10 s", what)
		var zero T
		return zero
	}
}

// TestCallersAnsweredWhileTheActorIsHeld: callers whose context ends while
// the actor is held by a function message are answered with the context's
// error, whether their messages wait in the mailbox or the actor had
// already taken them from it together with the function message; and none
// of them is counted.
func TestCallersAnsweredWhileTheActorIsHeld(t *testing.T) {
	a := newActor(t, actor.Config{})
	held1, release1, done1 := hold(t, a)
	within(t, held1, "first hold")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Behind the first hold: a second hold, then callers. The actor takes
	// them in one list once the first hold ends, and stops on the second.
	held2, release2, done2 := hold(t, a)
	waitPending(t, a, 1)
	const n = 20
	errs := make(chan error, 2*n)
	for range n {
		go func() { _, err := a.CheckRate(ctx, hit("behind")); errs <- err }()
	}
	waitPending(t, a, n+1)
	release1()
	require.NoError(t, within(t, done1, "first hold's caller"))
	within(t, held2, "second hold")
	// Callers that arrive while the actor is held wait in the mailbox; the n
	// before them wait in the list the actor took.
	for range n {
		go func() { _, err := a.CheckRate(ctx, hit("after")); errs <- err }()
	}
	waitPending(t, a, n)
	cancel()
	for i := range 2 * n {
		err := within(t, errs, fmt.Sprintf("caller %d of %d while the actor is held", i+1, 2*n))
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, rl.ErrUnavailable)
	}
	release2()
	require.NoError(t, within(t, done2, "second hold's caller"))
	assert.Equal(t, int64(0), count(t, a, "behind"), "no given-up check was counted")
	assert.Equal(t, int64(0), count(t, a, "after"))
}

// TestHandOffRace: many callers on a few shared contexts that end at
// random (cancelled or past a deadline), while function messages hold the
// actor now and then. Every
// caller returns; an error is the context's (or the actor's expiry,
// matching context.DeadlineExceeded), both matching
// raterlimiter.ErrUnavailable; and each id's count is exactly the number
// of checks answered without an error. Run with -race.
func TestHandOffRace(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 7))
	const ids = 8
	a := newActor(t, actor.Config{}) // a fixed clock: one window
	var counted [ids]atomic.Int64
	for round := range 40 {
		ctxs := make([]context.Context, 3)
		cancels := make([]context.CancelFunc, 3)
		for i := range ctxs {
			if rnd.IntN(2) == 0 {
				ctxs[i], cancels[i] = context.WithCancel(context.Background())
			} else {
				ctxs[i], cancels[i] = context.WithTimeout(context.Background(), time.Duration(rnd.IntN(3000))*time.Microsecond)
			}
		}
		callers := 50 + rnd.IntN(200)
		picks := make([]int, callers)
		for i := range picks {
			picks[i] = rnd.IntN(len(ctxs) * ids) // context and id
		}
		var holdRelease func()
		var holdDone chan error
		if rnd.IntN(2) == 0 {
			_, holdRelease, holdDone = hold(t, a)
		}
		cancelAt := time.Duration(rnd.IntN(2000)) * time.Microsecond
		var wg sync.WaitGroup
		for i := range callers {
			ctx, id := ctxs[picks[i]/ids], picks[i]%ids
			wg.Go(func() {
				r := hit(fmt.Sprint("id", id))
				r.Limit = 1 << 40
				_, err := a.CheckRate(ctx, r)
				if err == nil {
					counted[id].Add(1)
					return
				}
				if !errors.Is(err, rl.ErrUnavailable) || !(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
					t.Errorf("round %d: unexpected error %v", round, err)
				}
			})
		}
		time.Sleep(cancelAt)
		for i, c := range cancels {
			if rnd.IntN(3) != 0 || i == 0 {
				c()
			}
		}
		if holdRelease != nil {
			time.Sleep(time.Duration(rnd.IntN(1000)) * time.Microsecond)
			holdRelease()
		}
		finished := make(chan struct{})
		go func() { wg.Wait(); close(finished) }()
		within(t, finished, fmt.Sprintf("round %d's callers", round))
		if holdDone != nil {
			require.NoError(t, within(t, holdDone, "hold"))
		}
		for _, c := range cancels {
			c()
		}
	}
	for id := range ids {
		r := hit(fmt.Sprint("id", id))
		r.Limit, r.Hits = 1<<40, 0
		d, err := a.CheckRate(waitCtx(t), r)
		require.NoError(t, err)
		assert.Equal(t, counted[id].Load(), d.Count, "id%d: counted exactly the checks answered", id)
	}
}
