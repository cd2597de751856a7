package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/client"
	"github.com/raterlimiter/raterlimiter/internal/check"
)

// fixedClock is a client clock that never moves.
func fixedClock() time.Time { return time.UnixMilli(1_700_000_000_123) }

// canned starts a loopback server that answers every request with status and
// body, and records what it was sent.
type canned struct {
	srv   *httptest.Server
	mu    sync.Mutex
	reqs  []*http.Request
	body  []string
	count atomic.Int64
}

func newCanned(t *testing.T, status int, body string) *canned {
	t.Helper()
	c := &canned{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.reqs = append(c.reqs, r)
		c.body = append(c.body, string(b))
		c.mu.Unlock()
		c.count.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *canned) last(t *testing.T) (*http.Request, string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.NotEmpty(t, c.reqs, "the server saw no request")
	return c.reqs[len(c.reqs)-1], c.body[len(c.body)-1]
}

// stalled starts a loopback server that never answers until the test ends.
func stalled(t *testing.T) (url string, hits *atomic.Int64) {
	t.Helper()
	release := make(chan struct{})
	hits = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: handlers return, Close can finish
	return srv.URL, hits
}

func newClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	if cfg.Clock == nil {
		cfg.Clock = fixedClock
	}
	c, err := client.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

var okReq = rl.Request{ID: "u1", Scale: time.Second, Limit: 10, Hits: 1}

func TestNewRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://h", "http://", "http://h/?q=1", "http://h/#f", ":%"} {
		t.Run(u, func(t *testing.T) {
			_, err := client.New(client.Config{URL: u})
			assert.Error(t, err)
		})
	}
	for _, u := range []string{"http://127.0.0.1:8080", "http://127.0.0.1:8080/", "https://rl.internal/prefix/"} {
		t.Run(u, func(t *testing.T) {
			_, err := client.New(client.Config{URL: u})
			assert.NoError(t, err)
		})
	}
}

func TestCheckRateRequestAndDecision(t *testing.T) {
	srv := newCanned(t, http.StatusTooManyRequests,
		`{"allowed":false,"status":"fail","id":"x","count":11,"limit":10,"remaining":0,"reset_ms":412,"retry_after_ms":400,"delay_ms":0}`)
	c := newClient(t, client.Config{URL: srv.srv.URL + "/", AdminToken: "secret"})
	id := "a b/c?d=e&f%20#ü\x00\xff+\"'"
	d, err := c.CheckRate(context.Background(), rl.Request{ID: id, Scale: 30 * time.Second, Limit: 10, Peek: true, Algo: rl.Sliding})
	require.NoError(t, err)
	assert.Equal(t, rl.Decision{Count: 11, Limit: 10, Reset: 412 * time.Millisecond, RetryAfter: 400 * time.Millisecond, Now: fixedClock()}, d)

	r, _ := srv.last(t)
	assert.Equal(t, http.MethodGet, r.Method)
	assert.Equal(t, "/check_rate", r.URL.Path)
	q := r.URL.Query()
	assert.Equal(t, id, q.Get("id"), "the id arrives byte for byte")
	assert.Equal(t, "30000", q.Get("scale"))
	assert.Equal(t, "10", q.Get("limit"))
	assert.Equal(t, "0", q.Get("hits"), "hits is always sent: 0 peeks")
	assert.Equal(t, "sliding", q.Get("algo"))
	assert.Empty(t, r.Header.Get("Authorization"), "checks never carry the admin token")
}

// TestCheckRateSendsShaping: a slices or leaky check sends its slice
// count, queue and bound on the delay, and the answer's delay_ms arrives.
func TestCheckRateSendsShaping(t *testing.T) {
	srv := newCanned(t, http.StatusOK,
		`{"allowed":true,"status":"ok","id":"x","count":3,"limit":5,"remaining":2,"reset_ms":600,"retry_after_ms":0,"delay_ms":400}`)
	c := newClient(t, client.Config{URL: srv.srv.URL})
	d, err := c.CheckRate(context.Background(), rl.Request{ID: "x", Scale: time.Second, Limit: 5, Hits: 1, Algo: rl.Leaky, Queue: 3, MaxDelay: 700 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, 400*time.Millisecond, d.Delay)
	r, _ := srv.last(t)
	q := r.URL.Query()
	assert.Equal(t, "leaky", q.Get("algo"))
	assert.Equal(t, "3", q.Get("queue"))
	assert.Equal(t, "700", q.Get("max_delay_ms"))
	assert.False(t, q.Has("slices"))
	_, err = c.CheckRate(context.Background(), rl.Request{ID: "x", Scale: time.Minute, Limit: 5, Hits: 1, Algo: rl.Slices, Slices: 12})
	require.NoError(t, err)
	r, _ = srv.last(t)
	q = r.URL.Query()
	assert.Equal(t, "slices", q.Get("algo"))
	assert.Equal(t, "12", q.Get("slices"))
	assert.False(t, q.Has("queue"))
	assert.False(t, q.Has("max_delay_ms"))
}

func TestCheckRatesRequestAndDecisions(t *testing.T) {
	srv := newCanned(t, http.StatusOK,
		`[{"allowed":true,"count":1,"limit":10,"remaining":9,"reset_ms":1000,"retry_after_ms":0,"delay_ms":0},
		  {"allowed":false,"count":3,"limit":2,"remaining":0,"reset_ms":50,"retry_after_ms":50,"delay_ms":0},
		  {"allowed":true,"count":1,"limit":2,"remaining":1,"reset_ms":60000,"retry_after_ms":0,"delay_ms":0},
		  {"allowed":true,"count":2,"limit":2,"remaining":0,"reset_ms":1000,"retry_after_ms":0,"delay_ms":500}]`)
	c := newClient(t, client.Config{URL: srv.srv.URL})
	rs := []rl.Request{okReq, {ID: "quote\"and\\ünï", Scale: 5 * time.Millisecond, Limit: 2, Hits: 3, Algo: rl.Token},
		{ID: "s", Scale: time.Minute, Limit: 2, Hits: 1, Algo: rl.Slices, Slices: 6},
		{ID: "q", Scale: time.Second, Limit: 2, Hits: 1, Algo: rl.Leaky, Queue: 4, MaxDelay: 900 * time.Millisecond}}
	ds, err := c.CheckRates(context.Background(), rs)
	require.NoError(t, err)
	assert.Equal(t, []rl.Decision{
		{Allowed: true, Count: 1, Limit: 10, Remaining: 9, Reset: time.Second, Now: fixedClock()},
		{Count: 3, Limit: 2, Reset: 50 * time.Millisecond, RetryAfter: 50 * time.Millisecond, Now: fixedClock()},
		{Allowed: true, Count: 1, Limit: 2, Remaining: 1, Reset: time.Minute, Now: fixedClock()},
		{Allowed: true, Count: 2, Limit: 2, Reset: time.Second, Delay: 500 * time.Millisecond, Now: fixedClock()},
	}, ds)

	r, body := srv.last(t)
	assert.Equal(t, http.MethodPost, r.Method)
	assert.Equal(t, "/check_rates", r.URL.Path)
	assert.Equal(t, "application/json", r.Header.Get("Content-Type"))
	var wire []struct {
		ID                 string
		Scale, Limit, Hits int64
		Algo               check.AlgoName
		Slices, Queue      int64
		MaxDelayMS         int64 `json:"max_delay_ms"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &wire))
	var sent []rl.Request
	for _, w := range wire {
		sent = append(sent, rl.Request{ID: w.ID, Scale: time.Duration(w.Scale) * time.Millisecond, Limit: w.Limit, Hits: w.Hits,
			Algo: rl.Algo(w.Algo), Slices: w.Slices, Queue: w.Queue, MaxDelay: time.Duration(w.MaxDelayMS) * time.Millisecond})
	}
	assert.Equal(t, rs, sent, "the batch body decodes back to the requests")

	ds, err = c.CheckRates(context.Background(), nil)
	require.NoError(t, err)
	assert.Empty(t, ds)
	assert.EqualValues(t, 1, srv.count.Load(), "an empty batch costs no round trip")
}

func TestAdminCalls(t *testing.T) {
	t.Run("buckets as an array", func(t *testing.T) {
		srv := newCanned(t, http.StatusOK, `[{"scale":1000,"algo":"sliding","bucket":5,"count":2,"created":10,"modified":20}]`)
		c := newClient(t, client.Config{URL: srv.srv.URL, AdminToken: "T"})
		bs, err := c.Buckets(context.Background(), "a&b")
		require.NoError(t, err)
		assert.Equal(t, []rl.Bucket{{Scale: time.Second, Algo: rl.Sliding, Bucket: 5, Count: 2, Created: time.UnixMilli(10), Modified: time.UnixMilli(20)}}, bs)
		r, _ := srv.last(t)
		assert.Equal(t, http.MethodGet, r.Method)
		assert.Equal(t, "/buckets", r.URL.Path)
		assert.Equal(t, "a&b", r.URL.Query().Get("id"))
		assert.Equal(t, "Bearer T", r.Header.Get("Authorization"))
	})
	t.Run("buckets without a token", func(t *testing.T) {
		srv := newCanned(t, http.StatusOK, `[{"scale":7,"algo":"fixed","bucket":1,"count":1,"created":1,"modified":1}]`)
		c := newClient(t, client.Config{URL: srv.srv.URL})
		bs, err := c.Buckets(context.Background(), "u")
		require.NoError(t, err)
		assert.Equal(t, []rl.Bucket{{Scale: 7 * time.Millisecond, Bucket: 1, Count: 1, Created: time.UnixMilli(1), Modified: time.UnixMilli(1)}}, bs)
		r, _ := srv.last(t)
		assert.Empty(t, r.Header.Get("Authorization"), "no token configured, none sent")
	})
	t.Run("reset one scale", func(t *testing.T) {
		srv := newCanned(t, http.StatusOK, `{"deleted":3}`)
		c := newClient(t, client.Config{URL: srv.srv.URL, AdminToken: "T"})
		n, err := c.Reset(context.Background(), "u", time.Minute)
		require.NoError(t, err)
		assert.Equal(t, 3, n)
		r, _ := srv.last(t)
		assert.Equal(t, http.MethodDelete, r.Method)
		assert.Equal(t, "u", r.URL.Query().Get("id"))
		assert.Equal(t, "60000", r.URL.Query().Get("scale"))
		assert.Equal(t, "Bearer T", r.Header.Get("Authorization"))
	})
	t.Run("reset every scale sends no scale", func(t *testing.T) {
		srv := newCanned(t, http.StatusOK, `{"deleted":0}`)
		c := newClient(t, client.Config{URL: srv.srv.URL})
		n, err := c.Reset(context.Background(), "u", 0)
		require.NoError(t, err)
		assert.Equal(t, 0, n)
		r, _ := srv.last(t)
		assert.False(t, r.URL.Query().Has("scale"))
	})
	t.Run("401 without the token", func(t *testing.T) {
		srv := newCanned(t, http.StatusUnauthorized, `{"error":"admin token required"}`)
		c := newClient(t, client.Config{URL: srv.srv.URL})
		_, err := c.Reset(context.Background(), "u", 0)
		var ce *client.Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, http.StatusUnauthorized, ce.Status)
		assert.Equal(t, "client: 401 Unauthorized: admin token required", ce.Error())
		assert.NotErrorIs(t, err, rl.ErrUnavailable)
		assert.NotErrorIs(t, err, rl.ErrInvalid)
	})
}

func TestErrorsFromAnswers(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		body        string
		batch       bool
		unavailable bool
		invalid     bool
		field       string // a *FieldError with this field is expected
		index       int    // with an *ItemError of this index when >= 0
		message     string // else a *client.Error with this message
	}{
		{name: "400 names the field", status: 400, body: `{"error":"invalid scale","field":"scale","rule":"must be 1.."}`, invalid: true, field: "scale", index: -1},
		{name: "400 names the item", status: 400, batch: true, body: `{"error":"item 3","field":"limit","rule":"r","index":3}`, invalid: true, field: "limit", index: 3},
		{name: "400 names no field", status: 400, body: `{"error":"bad json"}`, invalid: true, index: -1, message: "bad json"},
		{name: "413 batch too large", status: 413, batch: true, body: `{"error":"at most 1000 items"}`, invalid: true, index: -1, message: "at most 1000 items"},
		{name: "503 overloaded", status: 503, body: `{"error":"limiter unavailable"}`, unavailable: true, index: -1, message: "limiter unavailable"},
		{name: "500 plain text", status: 500, body: "boom\n", unavailable: true, index: -1, message: "boom"},
		{name: "404 unknown path", status: 404, body: `{"error":"not found"}`, index: -1, message: "not found"},
		{name: "200 garbled", status: 200, body: `{"allowed":`, index: -1, message: "bad answer: unexpected end of JSON input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newCanned(t, tt.status, tt.body)
			c := newClient(t, client.Config{URL: srv.srv.URL})
			var err error
			if tt.batch {
				_, err = c.CheckRates(context.Background(), []rl.Request{okReq})
			} else {
				_, err = c.CheckRate(context.Background(), okReq)
			}
			require.Error(t, err)
			assert.Equal(t, tt.unavailable, errors.Is(err, rl.ErrUnavailable), "ErrUnavailable: %v", err)
			assert.Equal(t, tt.invalid, errors.Is(err, rl.ErrInvalid), "ErrInvalid: %v", err)
			if tt.field != "" {
				var fe *rl.FieldError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, tt.field, fe.Field)
				var ie *rl.ItemError
				assert.Equal(t, tt.index >= 0, errors.As(err, &ie))
				if tt.index >= 0 {
					assert.Equal(t, tt.index, ie.Index)
				}
				return
			}
			var ce *client.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.status, ce.Status)
			assert.Equal(t, "client: "+strconv.Itoa(tt.status)+" "+http.StatusText(tt.status)+": "+tt.message, ce.Error(),
				"the sidecar's message is in the error's text")
		})
	}
}

func TestInvalidRequestsAreRefusedLocally(t *testing.T) {
	srv := newCanned(t, http.StatusOK, `{}`)
	c := newClient(t, client.Config{URL: srv.srv.URL, MaxIDBytes: 8})
	tests := []struct {
		name  string
		r     rl.Request
		field string
	}{
		{"empty id", rl.Request{Scale: time.Millisecond, Limit: 1}, "ID"},
		{"id over the configured max", rl.Request{ID: "123456789", Scale: time.Millisecond, Limit: 1}, "ID"},
		{"scale 0", rl.Request{ID: "u", Limit: 1}, "Scale"},
		{"limit past the max", rl.Request{ID: "u", Scale: time.Millisecond, Limit: check.MaxLimit + 1}, "Limit"},
		{"negative hits", rl.Request{ID: "u", Scale: time.Millisecond, Hits: -1}, "Hits"},
		{"unknown algo", rl.Request{ID: "u", Scale: time.Millisecond, Algo: 9}, "Algo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.CheckRate(context.Background(), tt.r)
			require.ErrorIs(t, err, rl.ErrInvalid)
			var fe *rl.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tt.field, fe.Field)

			_, err = c.CheckRates(context.Background(), []rl.Request{okReq, okReq, tt.r})
			var ie *rl.ItemError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, 2, ie.Index)
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tt.field, fe.Field)
		})
	}
	t.Run("a batch refuses ids that JSON cannot carry", func(t *testing.T) {
		_, err := c.CheckRates(context.Background(), []rl.Request{okReq, {ID: "\xff", Scale: time.Millisecond}})
		var ie *rl.ItemError
		require.ErrorAs(t, err, &ie)
		assert.Equal(t, 1, ie.Index)
		assert.ErrorIs(t, err, rl.ErrInvalid)
	})
	t.Run("admin calls", func(t *testing.T) {
		_, err := c.Buckets(context.Background(), "")
		assert.ErrorIs(t, err, rl.ErrInvalid)
		_, err = c.Reset(context.Background(), "u", -1)
		assert.ErrorIs(t, err, rl.ErrInvalid)
	})
	assert.Zero(t, srv.count.Load(), "nothing invalid reached the server")
}

func TestTimeout(t *testing.T) {
	url, hits := stalled(t)
	c := newClient(t, client.Config{URL: url, Timeout: 50 * time.Millisecond})
	start := time.Now()
	_, err := c.CheckRate(context.Background(), okReq)
	elapsed := time.Since(start)
	require.Error(t, err)
	assert.ErrorIs(t, err, rl.ErrUnavailable)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	var ce *client.Error
	require.ErrorAs(t, err, &ce)
	assert.Zero(t, ce.Status)
	assert.Less(t, elapsed, 5*time.Second, "the timeout ends the call")
	assert.EqualValues(t, 1, hits.Load())

	t.Run("an earlier context deadline wins", func(t *testing.T) {
		c := newClient(t, client.Config{URL: url, Timeout: time.Hour})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := c.CheckRate(ctx, okReq)
		assert.ErrorIs(t, err, rl.ErrUnavailable)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

func TestContextCancellation(t *testing.T) {
	url, hits := stalled(t)
	for _, mode := range []rl.FailMode{rl.FailClosed, rl.FailOpen} {
		t.Run(mode.String(), func(t *testing.T) {
			c := newClient(t, client.Config{URL: url, Timeout: time.Hour, FailMode: mode})
			ctx, cancel := context.WithCancel(context.Background())
			before := hits.Load()
			done := make(chan error, 1)
			go func() {
				_, err := c.CheckRate(ctx, okReq)
				done <- err
			}()
			// Cancel once the request is in the server, so it is the
			// in-flight exchange that the cancellation ends.
			require.Eventually(t, func() bool { return hits.Load() > before }, 5*time.Second, time.Millisecond)
			cancel()
			select {
			case err := <-done:
				assert.ErrorIs(t, err, context.Canceled)
				assert.NotErrorIs(t, err, rl.ErrUnavailable, "a caller's cancellation is not the limiter's failure")
			case <-time.After(5 * time.Second):
				t.Fatal("CheckRate ignored the cancellation")
			}
		})
	}
	t.Run("already cancelled", func(t *testing.T) {
		c := newClient(t, client.Config{URL: url})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := c.CheckRates(ctx, []rl.Request{okReq})
		assert.ErrorIs(t, err, context.Canceled)
	})
}

func TestFailModes(t *testing.T) {
	stalledURL, _ := stalled(t)
	unavailable := newCanned(t, http.StatusServiceUnavailable, `{"error":"overloaded"}`)
	invalid := newCanned(t, http.StatusBadRequest, `{"error":"x","field":"limit","rule":"r"}`)
	// A listener that is closed: connections are refused.
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close()

	open := rl.Decision{Allowed: true, Limit: 10, Remaining: 10, Now: fixedClock(), FailMode: rl.FailOpen}
	tests := []struct {
		name     string
		url      string
		mode     rl.FailMode
		wantOpen bool
		wantErr  error
	}{
		{"closed: refused connection", goneURL, rl.FailClosed, false, rl.ErrUnavailable},
		{"closed: 503", unavailable.srv.URL, rl.FailClosed, false, rl.ErrUnavailable},
		{"closed: timeout", stalledURL, rl.FailClosed, false, context.DeadlineExceeded},
		{"open: refused connection", goneURL, rl.FailOpen, true, nil},
		{"open: 503", unavailable.srv.URL, rl.FailOpen, true, nil},
		{"open: timeout", stalledURL, rl.FailOpen, true, nil},
		{"open: an invalid answer stays an error", invalid.srv.URL, rl.FailOpen, false, rl.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var swallowed []error
			var checks int
			var mu sync.Mutex
			c := newClient(t, client.Config{URL: tt.url, FailMode: tt.mode, Timeout: 50 * time.Millisecond,
				OnDegraded: func(e rl.DegradedEvent) {
					mu.Lock()
					swallowed, checks = append(swallowed, e.Err), checks+e.Checks
					mu.Unlock()
					assert.Equal(t, rl.FailOpen, e.Mode)
				}})
			d, err := c.CheckRate(context.Background(), okReq)
			ds, berr := c.CheckRates(context.Background(), []rl.Request{okReq, okReq})
			mu.Lock()
			defer mu.Unlock()
			if tt.wantOpen {
				require.NoError(t, err)
				require.NoError(t, berr)
				assert.Equal(t, open, d)
				assert.Equal(t, []rl.Decision{open, open}, ds)
				require.Len(t, swallowed, 2, "OnDegraded sees each call answered open")
				assert.Equal(t, 3, checks, "and the checks it answered")
				assert.ErrorIs(t, swallowed[0], rl.ErrUnavailable)
				return
			}
			assert.ErrorIs(t, err, tt.wantErr)
			assert.ErrorIs(t, berr, tt.wantErr)
			assert.Empty(t, swallowed)
		})
	}
	t.Run("open: a local validation error stays an error", func(t *testing.T) {
		c := newClient(t, client.Config{URL: goneURL, FailMode: rl.FailOpen})
		_, err := c.CheckRate(context.Background(), rl.Request{ID: "u"})
		assert.ErrorIs(t, err, rl.ErrInvalid)
	})
}

func TestErrorText(t *testing.T) {
	tests := []struct {
		name string
		err  *client.Error
		want string
	}{
		{"status only", &client.Error{Status: 502}, "client: 502 Bad Gateway"},
		{"transport", &client.Error{Err: errors.New("dial tcp: refused")}, "client: dial tcp: refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.err.Error())
			assert.True(t, strings.HasPrefix(tt.err.Error(), "client: "))
		})
	}
}

// TestZeroClient: a Client not made by New says so, never a nil
// dereference.
func TestZeroClient(t *testing.T) {
	var c client.Client
	ctx := context.Background()
	r := rl.Request{ID: "u", Scale: time.Second, Limit: 1}
	_, err := c.CheckRate(ctx, r)
	assert.ErrorContains(t, err, "client.New")
	_, err = c.Wait(ctx, r)
	assert.ErrorContains(t, err, "client.New")
	_, err = c.CheckRates(ctx, []rl.Request{r})
	assert.ErrorContains(t, err, "client.New")
	_, _, err = c.CheckPolicy(ctx, "p", "u", 1)
	assert.ErrorContains(t, err, "client.New")
	_, err = c.Buckets(ctx, "u")
	assert.ErrorContains(t, err, "client.New")
	_, err = c.Reset(ctx, "u", 0)
	assert.ErrorContains(t, err, "client.New")
	assert.NoError(t, c.Close())
}
