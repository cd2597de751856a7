package api_test

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"github.com/raterlimiter/raterlimiter/api"
)

// timed is one held answer: its status, delay_ms and how long it took.
type timed struct {
	status int
	delay  int64
	took   time.Duration
	body   string
	err    error
}

// timedGet is harness.get for other goroutines: it returns its error.
func (h *harness) timedGet(uri string) timed {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://sidecar" + uri)
	req.Header.Set("X-Original-Method", "GET") // what nginx sends /auth
	req.Header.Set("X-Original-URI", "/q")
	start := time.Now()
	err := h.client.Do(req, resp)
	out := timed{status: resp.StatusCode(), took: time.Since(start), body: string(resp.Body()), err: err}
	var d struct {
		Delay int64 `json:"delay_ms"`
	}
	if err == nil && json.Unmarshal(resp.Body(), &d) == nil {
		out.delay = d.Delay
	}
	return out
}

// concurrently runs n requests of uri at once and returns them sorted by
// the delay the sidecar computed, then by the time they took.
func (h *harness) concurrently(t *testing.T, n int, uri string) []timed {
	t.Helper()
	out := make([]timed, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() { out[i] = h.timedGet(uri) })
	}
	wg.Wait()
	for _, r := range out {
		require.NoError(t, r.err)
	}
	// /auth's body carries no delay: then the order is that of the answers.
	slices.SortFunc(out, func(a, b timed) int { return cmp.Or(cmp.Compare(a.delay, b.delay), cmp.Compare(a.took, b.took)) })
	return out
}

// slack is how late a held answer may leave: the point is the order and
// the spacing, which the delays (computed at one instant of the limiter's
// clock) give exactly, so the bound on the time is one only an answer held
// far past its turn crosses (over 10 times the longest turn here, 600 ms),
// not a stall of a busy machine.
const slack = 10 * time.Second

// TestWaitHoldsEachAnswerForItsTurn: four wait=1 checks at once, five a
// second with a queue of three, answer 200 at 0, 200, 400 and 600 ms.
func TestWaitHoldsEachAnswerForItsTurn(t *testing.T) {
	h := newHarness(t, api.Config{})
	rs := h.concurrently(t, 4, "/check_rate?id=q&scale=1000&limit=5&algo=leaky&queue=3&wait=1")
	for i, r := range rs {
		want := int64(200 * i)
		assert.Equal(t, 200, r.status, "check %d: %s", i, r.body)
		assert.Equal(t, want, r.delay, "the limiter's clock stands still: the turns are exact")
		assert.GreaterOrEqual(t, r.took, time.Duration(want)*time.Millisecond, "held for its turn: %s", r.body)
		assert.Less(t, r.took, time.Duration(want)*time.Millisecond+slack, "released at its turn: %s", r.body)
	}
	// A fifth finds the queue full: 429 at once, nothing held.
	r := h.timedGet("/check_rate?id=q&scale=1000&limit=5&algo=leaky&queue=3&wait=1")
	require.NoError(t, r.err)
	assert.Equal(t, 429, r.status, r.body)
	assert.Less(t, r.took, slack)
}

// TestWaitPastMaxWaitIsRefusedAtOnce: a delay longer than -max-wait is a
// 429 at once that took no place in the queue. The turns are 2 s apart, so
// that an answer held for -max-wait (5 s) or its turn is told from one
// refused at once by a bound no stall of a busy machine reaches.
func TestWaitPastMaxWaitIsRefusedAtOnce(t *testing.T) {
	const maxWait = 5 * time.Second
	h := newHarness(t, api.Config{MaxWait: maxWait})
	const q = "/check_rate?id=q&scale=10000&limit=5&algo=leaky&queue=3"
	for i := range 3 {
		r := h.get(t, q)
		require.Equal(t, 200, r.status)
		assert.Contains(t, r.body, `"delay_ms":`+[]string{"0", "2000", "4000"}[i]+"}", "without wait=1 the caller waits: answered at once")
	}
	r := h.timedGet(q + "&wait=1")
	require.NoError(t, r.err)
	assert.Equal(t, 429, r.status, r.body)
	assert.Less(t, r.took, maxWait, "refused, not held")
	assert.Contains(t, r.body, `"retry_after_ms":1000,"delay_ms":0}`, "in 1 s the wait is 5 s")
	peek := h.get(t, q+"&hits=0")
	assert.Contains(t, peek.body, `"count":3,`, "the refused check took no place")
	// The caller's own bound holds too.
	r = h.timedGet(q + "&wait=1&max_delay_ms=5999")
	assert.Equal(t, 429, r.status, r.body)
	r = h.timedGet(q + "&max_delay_ms=6000")
	assert.Equal(t, 200, r.status, "a caller that waits itself may accept a longer wait: %s", r.body)
	assert.Less(t, r.took, maxWait, "answered at once, not held")
}

// TestHeldAnswerIsReleasedAtShutdown: a held answer leaves when the server
// shuts down, as decided, and Shutdown does not wait for its turn.
func TestHeldAnswerIsReleasedAtShutdown(t *testing.T) {
	h := newHarness(t, api.Config{MaxWait: time.Minute})
	for range 4 {
		require.Equal(t, 200, h.get(t, "/check_rate?id=q&scale=10000&limit=1&algo=leaky&queue=5").status)
	}
	got := make(chan timed, 1)
	go func() { got <- h.timedGet("/check_rate?id=q&scale=10000&limit=1&algo=leaky&queue=5&wait=1") }()
	require.Eventually(t, func() bool {
		return strings.Contains(h.get(t, "/metrics").body, "raterlimiter_held_answers 1")
	}, 10*time.Second, 10*time.Millisecond, "the answer is held")
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, h.srv.Shutdown(ctx))
	assert.Less(t, time.Since(start), 10*time.Second, "shutdown did not wait 40 s for the turn")
	r := <-got
	require.NoError(t, r.err)
	assert.Equal(t, 200, r.status, "answered as decided: %s", r.body)
	assert.Equal(t, int64(40_000), r.delay)
}

// TestAuthWaitsForAPolicyThatWaits: /auth holds an allowed answer until the
// turn of its policy with wait: true, and denies past -max-wait at once.
func TestAuthWaitsForAPolicyThatWaits(t *testing.T) {
	h, _ := newGateway(t, `policies:
  - name: queued
    match: {path_prefix: /q}
    key: ip
    algo: leaky
    limit: 5
    scale: 1s
    queue: 3
    wait: true
`, api.Config{MaxWait: 500 * time.Millisecond})
	rs := h.concurrently(t, 3, "/auth")
	for i, r := range rs {
		assert.Equal(t, 200, r.status, r.body)
		want := time.Duration(200*i) * time.Millisecond
		assert.GreaterOrEqual(t, r.took, want)
		assert.Less(t, r.took, want+slack)
	}
	r := h.timedGet("/auth")
	require.NoError(t, r.err)
	assert.Equal(t, 429, r.status, "600 ms is past -max-wait: %s", r.body)
	assert.Less(t, r.took, 500*time.Millisecond)
	assert.Empty(t, r.body, "a denial to nginx has no body")
}

func TestWaitAndShapingFieldsAreChecked(t *testing.T) {
	h, _ := newGateway(t, `policies:
  - {name: queued, key: ip, algo: leaky, limit: 5, scale: 1s, queue: 3, wait: true}
  - {name: hourly, key: ip, algo: slices, slices: 60, limit: 2, scale: 1h}
`, api.Config{})
	for _, tc := range []struct{ name, uri, field string }{
		{"wait 2", "/check_rate?id=u&scale=1000&limit=5&algo=leaky&wait=2", "wait"},
		{"wait yes", "/check_rate?id=u&scale=1000&limit=5&algo=leaky&wait=yes", "wait"},
		{"wait twice", "/check_rate?id=u&scale=1000&limit=5&algo=leaky&wait=1&wait=1", "wait"},
		{"slices with fixed", "/check_rate?id=u&scale=1000&limit=5&slices=10", "slices"},
		{"one slice", "/check_rate?id=u&scale=1000&limit=5&algo=slices&slices=1", "slices"},
		{"slices not a number", "/check_rate?id=u&scale=1000&limit=5&algo=slices&slices=-2", "slices"},
		{"queue with token", "/check_rate?id=u&scale=1000&limit=5&algo=token&queue=2", "queue"},
		{"queue past its bound", "/check_rate?id=u&scale=1000&limit=5&algo=leaky&queue=65537", "queue"},
		{"a bound on the delay past ten years", "/check_rate?id=u&scale=1000&limit=5&algo=leaky&max_delay_ms=315360000001", "max_delay_ms"},
		{"slices with a policy", "/check_rate?policy=hourly&id=u&slices=10", "policy"},
		{"queue with a policy", "/check_rate?policy=queued&id=u&queue=10", "policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.get(t, tc.uri)
			require.Equal(t, 400, r.status, r.body)
			assert.Contains(t, r.body, `"field":"`+tc.field+`"`)
		})
	}
	r := h.do(t, "POST", "/check_rates", "application/json", `[{"id":"u","scale":1000,"limit":5,"algo":"leaky","wait":true}]`)
	require.Equal(t, 400, r.status)
	assert.Contains(t, r.body, `"field":"wait"`)
	assert.Contains(t, r.body, `"index":0`)

	// JSON and forms say the same; a batch's answers carry their delays.
	r = h.do(t, "POST", "/check_rate", "application/json", `{"id":"j","scale":1000,"limit":5,"algo":"leaky","queue":2,"wait":false}`)
	require.Equal(t, 200, r.status, r.body)
	r = h.do(t, "POST", "/check_rate", "application/x-www-form-urlencoded", "id=j&scale=1000&limit=5&algo=leaky&queue=2&wait=0")
	require.Equal(t, 200, r.status, r.body)
	assert.Contains(t, r.body, `"delay_ms":200}`)
	r = h.do(t, "POST", "/check_rates", "application/json", `[{"id":"j","scale":1000,"limit":5,"algo":"leaky","queue":2},{"id":"s","scale":60000,"limit":5,"algo":"slices","slices":6}]`)
	require.Equal(t, 200, r.status, r.body)
	assert.Contains(t, r.body, `"delay_ms":400}`)
	assert.Contains(t, r.body, `"id":"s","count":1,"limit":5,"remaining":4,`)

	// A check by policy answers the policy's shape, and waits by the
	// policy unless it says wait=0.
	r = h.get(t, "/check_rate?policy=hourly&id=u")
	require.Equal(t, 200, r.status, r.body)
	assert.Contains(t, r.body, `"policy":"hourly","scale":3600000,"algo":"slices","slices":60}`)
	for range 2 {
		r = h.get(t, "/check_rate?policy=queued&id=u&wait=0")
		require.Equal(t, 200, r.status, r.body)
	}
	assert.Contains(t, r.body, `"delay_ms":200,"policy":"queued","scale":1000,"algo":"leaky","queue":3}`)
	start := time.Now()
	r = h.get(t, "/check_rate?policy=queued&id=u")
	require.Equal(t, 200, r.status, r.body)
	assert.Contains(t, r.body, `"delay_ms":400,`)
	assert.GreaterOrEqual(t, time.Since(start), 400*time.Millisecond, "held by the policy's wait: true")
}
