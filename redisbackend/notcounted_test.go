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
	"github.com/raterlimiter/raterlimiter/internal/redistest"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// TestUnansweredChecksAreNotCounted: checks sent while Redis is stopped
// (SIGSTOP) give up at their deadline and fail; when Redis continues it runs
// their scripts, already sent, which must count nothing. Redis's own error
// statistics show the scripts did run and were refused, so the test cannot
// pass by the scripts never arriving.
func TestUnansweredChecksAreNotCounted(t *testing.T) {
	srv := redistest.Start(t)
	b, err := redisbackend.New(redisbackend.Config{URL: srv.URL(), Prefix: "nc", Timeout: 10 * time.Second,
		ProbeInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	defer b.Close()
	r := rl.Request{ID: "late", Scale: 3_600_000, Limit: 1000, Hits: 1}
	// Load the script and make the connections before the stall.
	_, err = b.CheckRate(context.Background(), rl.Request{ID: "warm", Scale: 1000, Limit: 1, Hits: 1})
	require.NoError(t, err)

	const callers = 32
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

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	peek := r
	peek.Hits = 0
	// The stall may have opened the circuit: peek until a probe closes it.
	var d rl.Decision
	for {
		if d, err = b.CheckRate(ctx, peek); !errors.Is(err, redisbackend.ErrCircuitOpen) || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, err)
	assert.Equal(t, int64(0), d.Count, "checks whose callers gave up were counted")

	info, err := srv.CLI("INFO", "errorstats")
	require.NoError(t, err)
	m := regexp.MustCompile(`errorstat_DEADLINE:count=(\d+)`).FindStringSubmatch(info)
	require.NotNil(t, m, "redis refused no script past its deadline:\n%s", info)
	n, _ := strconv.Atoi(m[1])
	// Every script Redis received during the stall ran late; how many were
	// sent before the callers gave up (or the circuit opened) varies.
	t.Logf("%d of %d late scripts reached redis, all refused", n, callers)
	assert.True(t, n >= 1 && n <= callers, "%d scripts refused", n)

	// And after the stall, checks count again.
	d, err = b.CheckRate(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, int64(1), d.Count)
}
