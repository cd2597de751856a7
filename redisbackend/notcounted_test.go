package redisbackend_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// TestUnansweredChecksAreNotCounted: checks sent while Redis is stopped
// (SIGSTOP) give up at their deadline and fail; when Redis continues it runs
// their scripts, already sent, which must count nothing. Redis's own error
// statistics show the scripts did run and were refused, so the test cannot
// pass by the scripts never arriving. Whether a script leaves the client
// before its caller gives up is a race the client may lose (about one stall
// in fifty here sends none), so the stall is repeated, each time with the
// same assertions, until one has. It is Config.Deadlines' rule, for every
// algorithm (the default does without it: docs/redis.md, "What a check counts").
func TestUnansweredChecksAreNotCounted(t *testing.T) {
	for _, tc := range []struct {
		name string
		algo rl.Algo
	}{
		{"fixed", rl.Fixed},
		{"sliding", rl.Sliding},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			b, err := redisbackend.NewWithProbe(redisbackend.Config{URL: srv.URL(), Prefix: "nc", Timeout: 10 * time.Second,
				Deadlines: true}, 20*time.Millisecond)
			require.NoError(t, err)
			defer b.Close()
			// Load the script and make the connections before the stall.
			_, err = b.CheckRate(context.Background(), rl.Request{ID: "warm", Scale: time.Second, Limit: 1, Hits: 1, Algo: tc.algo})
			require.NoError(t, err)
			unanswered(t, srv, b, tc.algo)
		})
	}
}

func unanswered(t *testing.T, srv *redistest.Server, b *redisbackend.Backend, a rl.Algo) {
	const callers, attempts = 32, 5
	for attempt := 1; attempt <= attempts; attempt++ {
		r := rl.Request{ID: "late" + strconv.Itoa(attempt), Scale: time.Hour, Limit: 1000, Hits: 1, Algo: a}
		stall(t, srv, b, r, callers)

		// A stall shorter than DownAfter costs the callers' answers, not
		// the circuit for long: the next check goes to Redis (on a new
		// connection if the client dropped one at a deadline). On a starved
		// machine the end of a dropped connection (EOF) has been seen to
		// open the circuit until its probe's answer (once in six runs of
		// the suite beside a second copy): it must close again at once.
		if !b.Up() {
			t.Logf("attempt %d: the stall opened the circuit; waiting for its probe", attempt)
		}
		require.Eventually(t, b.Up, 5*time.Second, 10*time.Millisecond, "attempt %d: the circuit stayed open after the stall", attempt)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		peek := r
		peek.Hits, peek.Peek = 0, true
		d, err := b.CheckRate(ctx, peek)
		require.NoError(t, err, "attempt %d: the first check after the stall", attempt)
		assert.Equal(t, int64(0), d.Count, "attempt %d: checks whose callers gave up were counted", attempt)

		// And after the stall, checks count again.
		d, err = b.CheckRate(ctx, r)
		cancel()
		require.NoError(t, err)
		assert.Equal(t, int64(1), d.Count, "attempt %d", attempt)

		info, err := srv.CLI("INFO", "errorstats")
		require.NoError(t, err)
		if m := regexp.MustCompile(`errorstat_DEADLINE:count=(\d+)`).FindStringSubmatch(info); m != nil {
			n, _ := strconv.Atoi(m[1])
			// Every script Redis received during the stalls ran late; how
			// many were sent before the callers gave up (or the circuit
			// opened) varies.
			t.Logf("attempt %d: %d late scripts reached redis so far, all refused", attempt, n)
			assert.LessOrEqual(t, n, attempt*callers)
			return
		}
		t.Logf("attempt %d: no script left the client before its caller gave up; stalling again", attempt)
	}
	t.Fatalf("in %d stalls redis refused no script past its deadline", attempts)
}

// stall stops srv, sends callers concurrent checks of r that give up while it
// is stopped, and continues it; every caller must have failed unavailable.
func stall(t *testing.T, srv *redistest.Server, b *redisbackend.Backend, r rl.Request, callers int) {
	t.Helper()
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond) // long enough to be sent on a starved machine
			defer cancel()
			_, errs[i] = b.CheckRate(ctx, r)
		}()
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond) // well past every deadline
	srv.Resume()
	resumed = true
	for i, err := range errs {
		require.Error(t, err, "caller %d was answered while redis was stopped", i)
		assert.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, rl.ErrUnavailable), "caller %d: %v", i, err)
	}
}
