package main

import (
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
)

// stallEverySecond pauses redis-server for pause once a second until stop
// closes, and reports how many stalls it made.
func stallEverySecond(rs *redistest.Server, pause time.Duration, stop <-chan struct{}) <-chan int {
	n := make(chan int, 1)
	go func() {
		stalls := 0
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				n <- stalls
				return
			case <-t.C:
				rs.Pause()
				time.Sleep(pause)
				rs.Resume()
				stalls++
			}
		}
	}()
	return n
}

// statusCounts tallies answers by status.
type statusCounts struct {
	mu sync.Mutex
	by map[int]int
}

func (c *statusCounts) add(code int) {
	c.mu.Lock()
	c.by[code]++
	c.mu.Unlock()
}

// TestRedisStallsCostNoAnswers runs the sidecar on Redis with default flags
// and stalls redis-server for 80 ms once a second (SIGSTOP, SIGCONT), as a
// fork, a paused neighbour or a network blip would, while single checks
// from 128 and 1,024 callers and batches run: every check is answered
// (none 503), and every id is allowed exactly its limit.
func TestRedisStallsCostNoAnswers(t *testing.T) {
	redistest.Available(t)
	if testing.Short() {
		t.Skip("runs load for several seconds")
	}
	rs := redistest.Start(t)
	s := start(t, nil, "-backend", "redis", "-redis-url", rs.URL(), "-redis-max-scale", "87600h")
	hc := &fasthttp.HostClient{Addr: s.addr, MaxConns: 2048, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}

	for _, tc := range []struct {
		name    string
		callers int
		batch   int // checks per request; 1: GET /check_rate
	}{
		{"128 callers, single checks", 128, 1},
		{"1024 callers, single checks", 1024, 1},
		{"64 callers, batches of 50", 64, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const ids, limit = 16, 300
			run := strconv.FormatInt(time.Now().UnixNano(), 36)
			counts := &statusCounts{by: map[int]int{}}
			allowed := make([]atomic.Int64, ids)
			answered := make([]atomic.Int64, ids) // checks of each id answered 200 or 429
			var checks atomic.Int64
			stop := make(chan struct{})
			stalls := stallEverySecond(rs, 80*time.Millisecond, stop)
			// RATERLIMITER_STALL_LOAD lengthens the load, for a run of
			// more checks than CI affords (lab/notes/reliability.md, "Redis slow or
			// down").
			deadline := time.Now().Add(envDuration(t, "RATERLIMITER_STALL_LOAD", 4500*time.Millisecond))
			var wg sync.WaitGroup
			for c := range tc.callers {
				wg.Go(func() {
					var req fasthttp.Request
					var resp fasthttp.Response
					for i := 0; time.Now().Before(deadline); i++ {
						id := (c + i) % ids
						key := tc.name[:3] + run + "-" + strconv.Itoa(id)
						if tc.batch == 1 {
							req.Header.SetMethod("GET")
							req.SetRequestURI("http://" + s.addr + "/check_rate?id=" + key + "&scale=" + longScale + "&limit=" + strconv.Itoa(limit))
						} else {
							body := []byte{'['}
							for j := range tc.batch {
								if j > 0 {
									body = append(body, ',')
								}
								body = append(body, `{"id":"`+key+`","scale":`+longScale+`,"limit":`+strconv.Itoa(limit)+`}`...)
							}
							body = append(body, ']')
							req.Header.SetMethod("POST")
							req.Header.SetContentType("application/json")
							req.SetRequestURI("http://" + s.addr + "/check_rates")
							req.SetBody(body)
						}
						if err := hc.Do(&req, &resp); err != nil {
							counts.add(-1)
							continue
						}
						counts.add(resp.StatusCode())
						switch {
						case tc.batch == 1:
							checks.Add(1)
							if code := resp.StatusCode(); code == 200 || code == 429 {
								answered[id].Add(1)
							}
							if resp.StatusCode() == 200 {
								allowed[id].Add(1)
							}
						case resp.StatusCode() == 200:
							var ds []struct{ Allowed bool }
							if json.Unmarshal(resp.Body(), &ds) == nil {
								checks.Add(int64(len(ds)))
								answered[id].Add(int64(len(ds)))
								for _, d := range ds {
									if d.Allowed {
										allowed[id].Add(1)
									}
								}
							}
						}
					}
				})
			}
			wg.Wait()
			close(stop)
			n := <-stalls
			t.Logf("%d checks, %d stalls of 80 ms, answers by status: %v", checks.Load(), n, counts.by)
			require.GreaterOrEqual(t, n, 3, "the load ran across stalls")
			for code, k := range counts.by {
				assert.Contains(t, []int{200, 429}, code, "%d answers with status %d: a stall shorter than the deadline must cost no answer", k, code)
			}
			for id := range ids {
				// Exact: every check answered, so an id is allowed its
				// limit, or every check when it made fewer.
				assert.Equal(t, min(int64(limit), answered[id].Load()), allowed[id].Load(), "id %d allowed exactly min(limit, its checks)", id)
			}
		})
	}
	assert.NotContains(t, s.logs(), "circuit open", "no stall opened the circuit")
}

// TestRedisOutageEngagesTheFailMode stops redis-server: the fail mode (here
// open) engages once nothing has answered for DownAfter (2 s), never
// before, and the circuit closes once Redis answers again (within a probe,
// 100 ms). How long each took is logged (lab/notes/reliability.md); the test bounds
// them only at 10 times what they take, far above a busy machine's stalls.
func TestRedisOutageEngagesTheFailMode(t *testing.T) {
	redistest.Available(t)
	rs := redistest.Start(t)
	s := start(t, nil, "-backend", "redis", "-redis-url", rs.URL(), "-redis-fail", "open")
	hc := &fasthttp.HostClient{Addr: s.addr, ReadTimeout: 10 * time.Second}
	get := func() (int, string) {
		var req fasthttp.Request
		var resp fasthttp.Response
		req.SetRequestURI("http://" + s.addr + "/check_rate?id=outage&scale=60000&limit=1000000")
		require.NoError(t, hc.Do(&req, &resp))
		return resp.StatusCode(), string(resp.Header.Peek("X-RateLimit-Degraded"))
	}
	code, mode := get()
	require.Equal(t, 200, code)
	require.Empty(t, mode)

	rs.Pause()
	paused := time.Now()
	var engaged time.Duration
	seen := map[int]int{} // status: answers before the fail mode engaged
	for time.Since(paused) < 30*time.Second {
		code, mode = get()
		if mode == "open" {
			engaged = time.Since(paused)
			break
		}
		seen[code]++
		assert.Contains(t, []int{200, 503}, code)
	}
	require.NotZero(t, engaged, "the fail mode engaged while Redis did not answer (answers meanwhile, status: count: %v)\n%s", seen, s.logs())
	assert.GreaterOrEqual(t, engaged, 2*time.Second, "not before DownAfter")
	assert.Less(t, engaged, 10*(2*time.Second+200*time.Millisecond), "within DownAfter and one deadline, give or take a busy machine")
	t.Logf("fail mode open after %v", engaged)

	rs.Resume()
	resumed := time.Now()
	var recovered time.Duration
	for time.Since(resumed) < 30*time.Second {
		if code, mode = get(); code == 200 && mode == "" {
			recovered = time.Since(resumed)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.NotZero(t, recovered, "the circuit closed once Redis answered")
	assert.Less(t, recovered, 10*time.Second, "within a probe or so of SIGCONT, give or take a busy machine")
	t.Logf("recovered %v after SIGCONT", recovered)
	m := s.get(t, "/metrics").body
	assert.Contains(t, m, `raterlimiter_redis_circuit_transitions_total{reason="no_answer",state="open"} 1`)
	assert.Contains(t, m, `raterlimiter_redis_circuit_transitions_total{reason="answered",state="closed"} 1`)
}
