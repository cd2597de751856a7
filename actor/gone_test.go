package actor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/actor"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// blockOn makes the actor stop on the first check of id until release is
// closed; started is closed when it has stopped there.
func blockOn(a *actor.Actor, id string) (started, release chan struct{}) {
	started, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	a.SetHook(func(r any) {
		if req, ok := r.(millis.Request); ok && req.ID == id {
			once.Do(func() {
				close(started)
				<-release
			})
		}
	})
	return started, release
}

// count peeks at id's count.
func count(t *testing.T, a *actor.Actor, id string) int64 {
	t.Helper()
	r := hit(id)
	r.Hits = 0
	d, err := a.CheckRate(waitCtx(t), r)
	require.NoError(t, err)
	return d.Count
}

// TestGivenUpChecksAreNotCounted: a check whose caller gave up while it
// waited in the mailbox is skipped by the actor, so an error means "not
// counted" and a client that retries is counted once.
func TestGivenUpChecksAreNotCounted(t *testing.T) {
	a := newActor(t, actor.Config{})
	started, release := blockOn(a, "slow")
	go a.CheckRate(context.Background(), hit("slow"))
	<-started

	ctx, cancel := context.WithCancel(context.Background())
	single := make(chan error, 1)
	go func() { _, err := a.CheckRate(ctx, hit("u")); single <- err }()
	batch := make(chan error, 1)
	go func() {
		_, err := a.Decide(ctx, []millis.Request{hit("u"), hit("v")})
		batch <- err
	}()
	for a.Pending() < 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	require.ErrorIs(t, <-single, context.Canceled)
	require.ErrorIs(t, <-batch, rl.ErrUnavailable)
	close(release)

	assert.Equal(t, int64(0), count(t, a, "u"), "neither the check nor the batch was counted")
	assert.Equal(t, int64(0), count(t, a, "v"))
	d, err := a.CheckRate(waitCtx(t), hit("u"))
	require.NoError(t, err)
	assert.Equal(t, int64(1), d.Count, "the retry is the first hit counted")
}

// TestTakenChecksAreAnswered: a check the actor already took is applied and
// answered even if its caller's context ends meanwhile, so the caller never
// reports a failure for a hit that was counted.
func TestTakenChecksAreAnswered(t *testing.T) {
	a := newActor(t, actor.Config{})
	started, release := blockOn(a, "slow")
	ctx, cancel := context.WithCancel(context.Background())
	type answer struct {
		d   millis.Decision
		err error
	}
	done := make(chan answer, 1)
	go func() { d, err := a.CheckRate(ctx, hit("slow")); done <- answer{d, err} }()
	<-started
	cancel()
	time.Sleep(10 * time.Millisecond) // let the caller see its context end
	close(release)
	got := <-done
	require.NoError(t, got.err)
	assert.Equal(t, int64(1), got.d.Count)
	assert.Equal(t, int64(1), count(t, a, "slow"))
}

// pastDeadline is a context whose deadline has passed but whose Done
// channel has not been closed yet, as when the runtime's timer is late.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Second), true }

// TestExpiredChecksAreSkipped: the actor itself skips a message whose
// caller's deadline has passed, and tells the caller so.
func TestExpiredChecksAreSkipped(t *testing.T) {
	a := newActor(t, actor.Config{})
	ctx := pastDeadline{context.Background()}
	_, err := a.CheckRate(ctx, hit("u"))
	require.ErrorIs(t, err, actor.ErrExpired)
	require.ErrorIs(t, err, rl.ErrUnavailable)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = a.Decide(ctx, []millis.Request{hit("u")})
	require.ErrorIs(t, err, actor.ErrExpired)
	assert.Equal(t, int64(0), count(t, a, "u"))
}
