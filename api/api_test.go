package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

// t0 is a fixed instant, 500 ms into a minute.
const t0 = 1_700_000_040_500

type harness struct {
	srv    *api.Server
	ln     *fasthttputil.InmemoryListener
	client *fasthttp.Client
	clock  *limitertest.Clock
	lim    *memory.Limiter
}

func newHarness(t *testing.T, cfg api.Config) *harness {
	t.Helper()
	h := &harness{clock: limitertest.NewClock(time.UnixMilli(t0))}
	if cfg.Limiter == nil {
		h.lim = memory.New(memory.Config{Clock: h.clock.Now, SweepInterval: -1, Shards: 2})
		t.Cleanup(func() { h.lim.Close() })
		cfg.Limiter = h.lim
	}
	h.srv = api.New(cfg)
	h.ln = fasthttputil.NewInmemoryListener()
	done := make(chan error, 1)
	go func() { done <- h.srv.Serve(h.ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, h.srv.Shutdown(ctx))
		assert.NoError(t, <-done)
	})
	h.client = &fasthttp.Client{
		Dial:                          func(string) (net.Conn, error) { return h.ln.Dial() },
		DisableHeaderNamesNormalizing: true, // see the names as sent
	}
	return h
}

type response struct {
	status  int
	headers map[string]string
	body    string
}

func (h *harness) do(t *testing.T, method, uri, contentType, body string, hdr ...string) response {
	t.Helper()
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://sidecar" + uri)
	req.Header.SetMethod(method)
	req.Header.SetNoDefaultContentType(true)
	if contentType != "" {
		req.Header.SetContentType(contentType)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
		if strings.EqualFold(hdr[i], "Host") {
			req.UseHostHeader = true // the header's, not the URI's
		}
	}
	if body != "" {
		req.SetBodyString(body)
	}
	require.NoError(t, h.client.Do(req, resp))
	r := response{status: resp.StatusCode(), headers: map[string]string{}, body: string(resp.Body())}
	for k, v := range resp.Header.All() {
		r.headers[string(k)] = string(v)
	}
	return r
}

func (h *harness) get(t *testing.T, uri string) response {
	t.Helper()
	return h.do(t, "GET", uri, "", "")
}

// rateHeaders drops the headers every response has.
func rateHeaders(r response) map[string]string {
	out := map[string]string{}
	for k, v := range r.headers {
		switch k {
		case "Content-Type", "Content-Length", "Date", "Server", "Connection":
			continue
		}
		out[k] = v
	}
	return out
}

func TestCheckRateExactBodiesAndHeaders(t *testing.T) {
	h := newHarness(t, api.Config{})
	// Window [t0-500, t0+59500): reset is 59500 ms; ends at 1700000100 s.
	r := h.get(t, "/check_rate?id=u1&scale=60000&limit=2")
	assert.Equal(t, 200, r.status)
	assert.Equal(t, "application/json", r.headers["Content-Type"])
	assert.JSONEq(t, `{"allowed":true,"status":"ok","id":"u1","count":1,"limit":2,"remaining":1,"reset_ms":59500,"retry_after_ms":0,"delay_ms":0}`, r.body)
	assert.Equal(t, `{"allowed":true,"status":"ok","id":"u1","count":1,"limit":2,"remaining":1,"reset_ms":59500,"retry_after_ms":0,"delay_ms":0}`, r.body, "field order as SPEC")
	assert.Equal(t, map[string]string{
		"RateLimit-Policy":      `"default";q=2;w=60`,
		"RateLimit":             `"default";r=1;t=60`,
		"X-RateLimit-Limit":     "2",
		"X-RateLimit-Remaining": "1",
		"X-RateLimit-Reset":     "1700000100",
	}, rateHeaders(r))

	h.clock.Advance(time.Second)
	r = h.get(t, "/check_rate?id=u1&scale=60000&limit=2")
	assert.Equal(t, 200, r.status)
	r = h.get(t, "/check_rate?id=u1&scale=60000&limit=2")
	assert.Equal(t, 429, r.status)
	assert.Equal(t, `{"allowed":false,"status":"fail","id":"u1","count":3,"limit":2,"remaining":0,"reset_ms":58500,"retry_after_ms":58500,"delay_ms":0}`, r.body)
	assert.Equal(t, map[string]string{
		"RateLimit-Policy":      `"default";q=2;w=60`,
		"RateLimit":             `"default";r=0;t=59`,
		"X-RateLimit-Limit":     "2",
		"X-RateLimit-Remaining": "0",
		"X-RateLimit-Reset":     "1700000100",
		"Retry-After":           "59",
	}, rateHeaders(r))
}

func TestHeaderNamesOnTheWire(t *testing.T) {
	h := newHarness(t, api.Config{})
	require.Equal(t, 200, h.get(t, "/check_rate?id=w&scale=1000&limit=1").status)
	c, err := h.ln.Dial()
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET /check_rate?id=w&scale=1000&limit=1 HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(c)
	var names []string
	for {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		if k, _, ok := strings.Cut(line, ":"); ok {
			names = append(names, k)
		}
	}
	for _, want := range []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"} {
		assert.Contains(t, names, want)
	}
}

func TestPostFormAndJSON(t *testing.T) {
	h := newHarness(t, api.Config{})
	tests := []struct {
		name, ct, body string
		status         int
		count          int64
	}{
		{"form", "application/x-www-form-urlencoded", "id=p&scale=60000&limit=5", 200, 1},
		{"json", "application/json", `{"id":"p","scale":60000,"limit":5}`, 200, 2},
		{"json with charset", "application/json; charset=utf-8", `{"id":"p","scale":60000,"limit":5,"hits":2}`, 200, 4},
		{"json sniffed without content type", "", ` {"id":"p","scale":60000,"limit":5}`, 200, 5},
		{"form sniffed without content type", "", `id=p&scale=60000&limit=5`, 429, 6},
		{"json escapes in id and keys", "application/json", `{"\u0069d":"\u0070","scale":60000,"limit":5,"algo":"fixed"}`, 429, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(t, "POST", "/check_rate", tt.ct, tt.body)
			require.Equal(t, tt.status, r.status, r.body)
			var body struct{ Count int64 }
			require.NoError(t, json.Unmarshal([]byte(r.body), &body))
			assert.Equal(t, tt.count, body.Count)
		})
	}
}

// errBody is the 400 body.
type errBody struct {
	Error string `json:"error"`
	Field string `json:"field"`
	Rule  string `json:"rule"`
	Index *int   `json:"index"`
}

func TestInvalidInputIsRefusedAndCountsNothing(t *testing.T) {
	h := newHarness(t, api.Config{MaxIDBytes: 8})
	r := h.get(t, "/check_rate?id=v&scale=60000&limit=5")
	require.Equal(t, 200, r.status)
	tests := []struct {
		name, method, ct, uri, body, field string
	}{
		{"no id", "GET", "", "/check_rate?scale=60000&limit=5", "", "id"},
		{"empty id", "GET", "", "/check_rate?id=&scale=60000&limit=5", "", "id"},
		{"id too long", "GET", "", "/check_rate?id=123456789&scale=60000&limit=5", "", "id"},
		{"no scale", "GET", "", "/check_rate?id=v&limit=5", "", "scale"},
		{"scale zero", "GET", "", "/check_rate?id=v&scale=0&limit=5", "", "scale"},
		{"scale signed", "GET", "", "/check_rate?id=v&scale=%2B60000&limit=5", "", "scale"},
		{"scale negative", "GET", "", "/check_rate?id=v&scale=-1&limit=5", "", "scale"},
		{"scale with space", "GET", "", "/check_rate?id=v&scale=%2060000&limit=5", "", "scale"},
		{"scale empty", "GET", "", "/check_rate?id=v&scale=&limit=5", "", "scale"},
		{"scale hex", "GET", "", "/check_rate?id=v&scale=0x10&limit=5", "", "scale"},
		{"scale overflow", "GET", "", "/check_rate?id=v&scale=99999999999999999999999&limit=5", "", "scale"},
		{"scale twice", "GET", "", "/check_rate?id=v&scale=60000&scale=60000&limit=5", "", "scale"},
		{"id twice", "GET", "", "/check_rate?id=v&id=w&scale=60000&limit=5", "", "id"},
		{"limit past max", "GET", "", "/check_rate?id=v&scale=60000&limit=4294967296", "", "limit"},
		{"hits past max", "GET", "", "/check_rate?id=v&scale=60000&limit=5&hits=4294967296", "", "hits"},
		{"bad algo", "GET", "", "/check_rate?id=v&scale=60000&limit=5&algo=gcra", "", "algo"},
		{"form bad limit", "POST", "application/x-www-form-urlencoded", "/check_rate", "id=v&scale=60000&limit=x", "limit"},
		{"json float", "POST", "application/json", "/check_rate", `{"id":"v","scale":6e4,"limit":5}`, "scale"},
		{"json string number", "POST", "application/json", "/check_rate", `{"id":"v","scale":"60000","limit":5}`, "scale"},
		{"json negative", "POST", "application/json", "/check_rate", `{"id":"v","scale":60000,"limit":-5}`, "limit"},
		{"json null hits", "POST", "application/json", "/check_rate", `{"id":"v","scale":60000,"limit":5,"hits":null}`, "hits"},
		{"json number id", "POST", "application/json", "/check_rate", `{"id":5,"scale":60000,"limit":5}`, "id"},
		{"json duplicate", "POST", "application/json", "/check_rate", `{"id":"v","id":"v","scale":60000,"limit":5}`, "id"},
		{"json trailing comma", "POST", "application/json", "/check_rate", `{"id":"v","scale":60000,"limit":5,}`, "body"},
		{"json trailing data", "POST", "application/json", "/check_rate", `{"id":"v","scale":60000,"limit":5} x`, "body"},
		{"json leading zero", "POST", "application/json", "/check_rate", `{"id":"v","scale":060000,"limit":5}`, "body"},
		{"json bad utf8", "POST", "application/json", "/check_rate", "{\"id\":\"v\xff\",\"scale\":60000,\"limit\":5}", "body"},
		{"json array", "POST", "application/json", "/check_rate", `[]`, "body"},
		{"json empty", "POST", "application/json", "/check_rate", ``, "body"},
		{"other content type", "POST", "text/plain", "/check_rate", `id=v&scale=60000&limit=5`, "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(t, tt.method, tt.uri, tt.ct, tt.body)
			require.Equal(t, 400, r.status, r.body)
			var e errBody
			require.NoError(t, json.Unmarshal([]byte(r.body), &e), r.body)
			assert.Equal(t, tt.field, e.Field)
			assert.NotEmpty(t, e.Rule)
			assert.Contains(t, e.Error, tt.field)
			assert.Contains(t, e.Error, e.Rule)
			assert.Nil(t, e.Index)
		})
	}
	r = h.get(t, "/check_rate?id=v&scale=60000&limit=5&hits=0")
	assert.Equal(t, 200, r.status)
	assert.Contains(t, r.body, `"count":1,`, "invalid requests counted nothing")
}

func TestBatch(t *testing.T) {
	h := newHarness(t, api.Config{MaxBatch: 3})
	body := `[{"id":"a","scale":60000,"limit":1},{"id":"b","scale":1000,"limit":0},{"id":"a","scale":60000,"limit":1}]`
	r := h.do(t, "POST", "/check_rates", "application/json", body)
	require.Equal(t, 200, r.status, r.body)
	assert.Equal(t, "["+
		`{"allowed":true,"status":"ok","id":"a","count":1,"limit":1,"remaining":0,"reset_ms":59500,"retry_after_ms":0,"delay_ms":0},`+
		`{"allowed":false,"status":"fail","id":"b","count":1,"limit":0,"remaining":0,"reset_ms":500,"retry_after_ms":500,"delay_ms":0},`+
		`{"allowed":false,"status":"fail","id":"a","count":2,"limit":1,"remaining":0,"reset_ms":59500,"retry_after_ms":59500,"delay_ms":0}`+
		"]", r.body)

	r = h.do(t, "POST", "/check_rates", "application/json", `[]`)
	assert.Equal(t, 200, r.status)
	assert.Equal(t, `[]`, r.body)

	r = h.do(t, "POST", "/check_rates", "", `[{"id":"a","scale":60000,"limit":1},{"id":"a","scale":0,"limit":1}]`)
	require.Equal(t, 400, r.status)
	var e errBody
	require.NoError(t, json.Unmarshal([]byte(r.body), &e))
	require.NotNil(t, e.Index)
	assert.Equal(t, 1, *e.Index)
	assert.Equal(t, "scale", e.Field)
	assert.Contains(t, e.Error, "item 1")

	r = h.do(t, "POST", "/check_rates", "", `[{"id":"a","scale":60000,"limit":1},{"id":"a","limit":1}]`)
	require.Equal(t, 400, r.status)
	require.NoError(t, json.Unmarshal([]byte(r.body), &e))
	assert.Equal(t, 1, *e.Index)
	assert.Equal(t, "scale", e.Field)
	assert.Equal(t, "is required", e.Rule)

	four := `[` + strings.Repeat(`{"id":"a","scale":60000,"limit":1},`, 3) + `{"id":"a","scale":60000,"limit":1}]`
	r = h.do(t, "POST", "/check_rates", "", four)
	assert.Equal(t, 413, r.status, r.body)

	r = h.get(t, "/check_rate?id=a&scale=60000&limit=1&hits=0")
	assert.Contains(t, r.body, `"count":2,`, "refused batches counted nothing")
}

func TestAdmin(t *testing.T) {
	h := newHarness(t, api.Config{AdminToken: "s3cret"})
	h.get(t, "/check_rate?id=adm&scale=60000&limit=5")
	h.get(t, "/check_rate?id=adm&scale=1000&limit=5")

	for _, auth := range []string{"", "Bearer wrong", "Bearer s3cret2", "Bearers3cret", "Basic s3cret", "s3cret", "Bearer"} {
		r := h.do(t, "GET", "/buckets?id=adm", "", "", "Authorization", auth)
		assert.Equal(t, 401, r.status, "Authorization %q", auth)
		assert.Equal(t, `Bearer realm="raterlimiter"`, r.headers["WWW-Authenticate"])
	}
	// The scheme is compared without case (RFC 9110 §11.1).
	for _, auth := range []string{"bearer s3cret", "BEARER s3cret", "Bearer  s3cret"} {
		assert.Equal(t, 200, h.do(t, "GET", "/buckets?id=adm", "", "", "Authorization", auth).status, "Authorization %q", auth)
	}
	auth := []string{"Authorization", "Bearer s3cret"}
	r := h.do(t, "GET", "/buckets?id=adm", "", "", auth...)
	require.Equal(t, 200, r.status, r.body)
	assert.JSONEq(t, `[
		{"scale":1000,"algo":"fixed","bucket":1700000040,"count":1,"created":1700000040500,"modified":1700000040500},
		{"scale":60000,"algo":"fixed","bucket":28333334,"count":1,"created":1700000040500,"modified":1700000040500}]`, r.body)

	r = h.do(t, "GET", "/buckets?id=nobody", "", "", auth...)
	assert.Equal(t, `[]`, r.body)

	r = h.do(t, "DELETE", "/buckets?id=adm&scale=1000", "", "", auth...)
	assert.Equal(t, `{"deleted":1}`, r.body)
	r = h.do(t, "DELETE", "/buckets?id=adm", "", "", auth...)
	assert.Equal(t, `{"deleted":1}`, r.body)
	r = h.do(t, "DELETE", "/buckets?id=adm", "", "", auth...)
	assert.Equal(t, `{"deleted":0}`, r.body)

	for _, uri := range []string{"/buckets", "/buckets?id=", "/buckets?id=a&scale=0", "/buckets?id=a&scale=x", "/buckets?id=a&id=b"} {
		r = h.do(t, "DELETE", uri, "", "", auth...)
		assert.Equal(t, 400, r.status, uri)
	}
	r = h.do(t, "GET", "/buckets?id=a&scale=1000", "", "", auth...)
	assert.Equal(t, 400, r.status)

	// /check_rate never needs the token.
	r = h.get(t, "/check_rate?id=adm&scale=60000&limit=5")
	assert.Equal(t, 200, r.status)
}

// TestProfiles: Go's profiles answer under /debug/pprof/, each by its own
// handler, behind the admin token.
func TestProfiles(t *testing.T) {
	h := newHarness(t, api.Config{AdminToken: "s3cret"})
	auth := []string{"Authorization", "Bearer s3cret"}
	for uri, want := range map[string]string{
		"/debug/pprof/":             "Types of profiles available",
		"/debug/pprof/cmdline":      os.Args[0],
		"/debug/pprof/symbol":       "num_symbols:",
		"/debug/pprof/heap?debug=1": "heap profile:",
	} {
		r := h.do(t, "GET", uri, "", "")
		assert.Equal(t, 401, r.status, uri)
		r = h.do(t, "GET", uri, "", "", auth...)
		assert.Equal(t, 200, r.status, uri)
		assert.Contains(t, r.body, want, uri)
	}
}

func TestRoutes(t *testing.T) {
	h := newHarness(t, api.Config{})
	tests := []struct {
		method, uri string
		status      int
		allow       string
	}{
		{"GET", "/", 404, ""},
		{"GET", "/check_rate/", 404, ""},
		{"GET", "/nope", 404, ""},
		{"PUT", "/check_rate?id=a&scale=1&limit=1", 405, "GET, POST"},
		{"DELETE", "/check_rate", 405, "GET, POST"},
		{"HEAD", "/check_rate?id=a&scale=1&limit=1", 405, "GET, POST"},
		{"GET", "/check_rates", 405, "POST"},
		{"POST", "/buckets?id=a", 405, "GET, DELETE"},
		{"POST", "/healthz", 405, "GET, HEAD"},
		{"DELETE", "/metrics", 405, "GET, HEAD"},
		{"GET", "/healthz", 200, ""},
		{"HEAD", "/healthz", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.uri, func(t *testing.T) {
			r := h.do(t, tt.method, tt.uri, "", "")
			assert.Equal(t, tt.status, r.status)
			assert.Equal(t, tt.allow, r.headers["Allow"])
			if tt.status >= 400 && tt.method != "HEAD" {
				var e errBody
				require.NoError(t, json.Unmarshal([]byte(r.body), &e), r.body)
				assert.NotEmpty(t, e.Error)
			}
		})
	}
	r := h.get(t, "/healthz")
	assert.Equal(t, "ok", r.body)
}

// stuck is a limiter that never answers before its context ends.
type stuck struct {
	rl.Limiter
}

func (s *stuck) CheckRate(ctx context.Context, _ rl.Request) (rl.Decision, error) {
	<-ctx.Done()
	return rl.Decision{}, ctx.Err()
}

func (s *stuck) CheckRates(ctx context.Context, _ []rl.Request) ([]rl.Decision, error) {
	<-ctx.Done()
	return nil, fmt.Errorf("stuck: %w", rl.ErrUnavailable)
}

func TestUnavailableIs503WithinTimeout(t *testing.T) {
	h := newHarness(t, api.Config{Limiter: &stuck{}, Timeout: 50 * time.Millisecond})
	for _, tc := range []struct{ method, uri, body string }{
		{"GET", "/check_rate?id=a&scale=1000&limit=1", ""},
		{"POST", "/check_rates", `[{"id":"a","scale":1000,"limit":1}]`},
		{"GET", "/healthz", ""},
	} {
		start := time.Now()
		r := h.do(t, tc.method, tc.uri, "", tc.body)
		assert.Equal(t, 503, r.status, tc.uri)
		assert.Less(t, time.Since(start), 5*time.Second, "bounded by the timeout")
		var e errBody
		require.NoError(t, json.Unmarshal([]byte(r.body), &e), r.body)
		assert.Contains(t, e.Error, "cannot answer")
	}
	r := h.get(t, "/metrics")
	assert.Contains(t, r.body, `raterlimiter_checks_total{algo="fixed",result="unavailable",via="http"} 1`)
	assert.Contains(t, r.body, `raterlimiter_checks_total{algo="fixed",result="unavailable",via="batch"} 1`)
}

func TestClosedLimiterIs503(t *testing.T) {
	h := newHarness(t, api.Config{})
	require.NoError(t, h.lim.Close())
	r := h.get(t, "/check_rate?id=a&scale=1000&limit=1")
	assert.Equal(t, 503, r.status, r.body)
	assert.Equal(t, 503, h.get(t, "/healthz").status)
}

func TestMetrics(t *testing.T) {
	h := newHarness(t, api.Config{Stats: func() api.BackendStats {
		return api.BackendStats{Live: 7, Restarts: 2, Pending: 3, Evicted: 11}
	}})
	h.get(t, "/check_rate?id=m&scale=60000&limit=1")
	h.get(t, "/check_rate?id=m&scale=60000&limit=1")
	h.get(t, "/check_rate?id=m&scale=60000&limit=1&algo=token")
	h.get(t, "/check_rate?id=m&scale=0&limit=1")
	h.do(t, "POST", "/check_rates", "", `[{"id":"a","scale":1000,"limit":1},{"id":"b","scale":1000,"limit":1}]`)
	h.srv.AddSwept(5)
	r := h.get(t, "/metrics")
	require.Equal(t, 200, r.status)
	assert.True(t, strings.HasPrefix(r.headers["Content-Type"], "text/plain; version=0.0.4"), r.headers["Content-Type"])
	for _, want := range []string{
		`raterlimiter_checks_total{algo="fixed",result="allowed",via="http"} 1`,
		`raterlimiter_checks_total{algo="fixed",result="allowed",via="batch"} 2`,
		`raterlimiter_checks_total{algo="fixed",result="denied",via="http"} 1`,
		`raterlimiter_checks_total{algo="token",result="allowed",via="http"} 1`,
		`raterlimiter_checks_total{algo="fixed",result="invalid",via="http"} 1`,
		`raterlimiter_batch_size_count 1`,
		`raterlimiter_batch_size_sum 2`,
		`raterlimiter_request_duration_seconds_count{endpoint="check_rate"} 3`,
		`raterlimiter_request_duration_seconds_count{endpoint="check_rates"} 1`,
		`raterlimiter_live_buckets 7`,
		`raterlimiter_actor_restarts_total 2`,
		`raterlimiter_mailbox_depth 3`,
		`raterlimiter_evicted_buckets_total 11`,
		`raterlimiter_swept_buckets_total 5`,
		`go_goroutines `,
	} {
		assert.Contains(t, r.body, want)
	}
}

func TestBoundsAtTheirEdges(t *testing.T) {
	h := newHarness(t, api.Config{})
	maxID := strings.Repeat("\xff", check.DefaultMaxIDBytes)
	q := func(id string, scale, limit, hits int64, algo string) string {
		v := url.Values{"id": {id}, "scale": {strconv.FormatInt(scale, 10)}, "limit": {strconv.FormatInt(limit, 10)}, "hits": {strconv.FormatInt(hits, 10)}}
		if algo != "" {
			v.Set("algo", algo)
		}
		return "/check_rate?" + v.Encode()
	}
	tests := []struct {
		name   string
		uri    string
		status int
	}{
		{"id 1 byte", q("a", 1000, 1, 1, ""), 200},
		{"id max bytes, percent-encoded", q(maxID, 1000, 1, 1, ""), 200},
		{"id max+1 bytes", q(maxID+"x", 1000, 1, 1, ""), 400},
		{"scale 1", q("s1", 1, 1, 1, ""), 200},
		{"scale max", q("s2", check.MaxScale.Milliseconds(), 1, 1, ""), 200},
		{"scale max+1", q("s3", check.MaxScale.Milliseconds()+1, 1, 1, ""), 400},
		{"limit 0 denies", q("l1", 1000, 0, 1, ""), 429},
		{"limit max", q("l2", 1000, check.MaxLimit, check.MaxHits, ""), 200},
		{"limit max+1", q("l3", 1000, check.MaxLimit+1, 1, ""), 400},
		{"hits 0 peeks", q("h1", 1000, 0, 0, ""), 200},
		{"hits max over a small limit", q("h2", 1000, 1, check.MaxHits, ""), 429},
		{"hits max+1", q("h3", 1000, 1, check.MaxHits+1, ""), 400},
		{"algo sliding", q("a1", 1000, 1, 1, "sliding"), 200},
		{"algo token", q("a2", 1000, 1, 1, "token"), 200},
		{"algo unknown", q("a3", 1000, 1, 1, "gcra"), 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.get(t, tt.uri)
			assert.Equal(t, tt.status, r.status, r.body)
		})
	}
}

func TestHostileRequestsGetJSONErrors(t *testing.T) {
	h := newHarness(t, api.Config{MaxBodyBytes: 1024})
	// A request line and headers beyond the read buffer: 431.
	r := h.do(t, "GET", "/check_rate?id=a&scale=1000&limit=1", "", "", "X-Big", strings.Repeat("x", 3*48<<10))
	assert.Equal(t, 431, r.status)
	assert.Contains(t, r.body, `"error"`)
	// A body beyond MaxBodyBytes: 413.
	r = h.do(t, "POST", "/check_rates", "application/json", "["+strings.Repeat(`{"id":"a","scale":1000,"limit":1},`, 40)+"]")
	assert.Equal(t, 413, r.status)
	assert.Contains(t, r.body, `"error"`)
	// The largest id, every byte percent-encoded, fits the default buffer.
	big := url.QueryEscape(strings.Repeat("\xff", check.DefaultMaxIDBytes))
	r = h.get(t, "/check_rate?id="+big+"&scale=1000&limit=1")
	assert.Equal(t, 200, r.status, r.body)
}

// failOpen answers every check allowed by its fail mode, as the Redis
// backend does with FailOpen while Redis does not answer.
type failOpen struct{ rl.Limiter }

func (failOpen) CheckRate(_ context.Context, r rl.Request) (rl.Decision, error) {
	return rl.Decision{Allowed: true, Limit: r.Limit, Remaining: r.Limit, Reset: r.Scale, Now: time.UnixMilli(t0), FailMode: rl.FailOpen}, nil
}

func (failOpen) CheckRates(_ context.Context, rs []rl.Request) ([]rl.Decision, error) {
	ds := make([]rl.Decision, len(rs))
	for i, r := range rs {
		ds[i] = rl.Decision{Allowed: true, Limit: r.Limit, Remaining: r.Limit, Reset: r.Scale, Now: time.UnixMilli(t0), FailMode: rl.FailOpen}
	}
	return ds, nil
}

func TestDegradedAnswersAreServedAndSaySo(t *testing.T) {
	h := newHarness(t, api.Config{Limiter: failOpen{}})
	r := h.get(t, "/check_rate?id=a&scale=1000&limit=3")
	assert.Equal(t, 200, r.status, r.body)
	assert.Equal(t, "open", r.headers[api.DegradedHeader])
	assert.Equal(t, `{"allowed":true,"status":"ok","id":"a","count":0,"limit":3,"remaining":3,"reset_ms":1000,"retry_after_ms":0,"delay_ms":0}`, r.body)
	assert.Equal(t, "3", r.headers["X-RateLimit-Remaining"])

	r = h.do(t, "POST", "/check_rates", "", `[{"id":"a","scale":1000,"limit":3},{"id":"b","scale":2000,"limit":1}]`)
	assert.Equal(t, 200, r.status, r.body)
	assert.Equal(t, "open", r.headers[api.DegradedHeader])
	assert.Contains(t, r.body, `"id":"b","count":0,"limit":1,"remaining":1,"reset_ms":2000`)

	r = h.get(t, "/healthz")
	assert.Equal(t, 200, r.status, "checks are answered: healthy, degraded")
	assert.Equal(t, "degraded: open", r.body)
	assert.Equal(t, "open", r.headers[api.DegradedHeader])

	// A plain unavailable error still fails closed.
	h = newHarness(t, api.Config{Limiter: &stuck{}, Timeout: 10 * time.Millisecond})
	r = h.get(t, "/check_rate?id=a&scale=1000&limit=3")
	assert.Equal(t, 503, r.status)
	assert.Empty(t, r.headers[api.DegradedHeader])
	assert.Equal(t, 503, h.get(t, "/healthz").status)
}

func TestMetricsTakeTheBackendsCollectors(t *testing.T) {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "backend_things_total", Help: "Things."})
	c.Add(4)
	h := newHarness(t, api.Config{Collectors: []prometheus.Collector{c}})
	r := h.get(t, "/metrics")
	require.Equal(t, 200, r.status)
	assert.Contains(t, r.body, "backend_things_total 4")
}

func TestShutdownBeforeOrDuringServeReturns(t *testing.T) {
	for i := range 50 { // the race is between Serve starting and Shutdown
		lim := memory.New(memory.Config{SweepInterval: -1})
		srv := api.New(api.Config{Limiter: lim})
		ln := fasthttputil.NewInmemoryListener()
		done := make(chan error, 1)
		if i == 0 {
			require.NoError(t, srv.Shutdown(context.Background()))
		}
		go func() { done <- srv.Serve(ln) }()
		require.NoError(t, srv.Shutdown(context.Background()))
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Serve did not return after Shutdown", i)
		}
		lim.Close()
	}
}

func TestSlowClientIsCutOffAfterReadTimeout(t *testing.T) {
	h := newHarness(t, api.Config{ReadTimeout: 200 * time.Millisecond})
	c, err := h.ln.Dial()
	require.NoError(t, err)
	defer c.Close()
	start := time.Now()
	_, err = io.WriteString(c, "GET /check_rate?id=slow&scale=1000&limit=1 HTTP/1.1\r\nHost: x\r\n") // never ends
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	got, _ := io.ReadAll(c) // until the server closes the connection
	assert.Less(t, time.Since(start), 5*time.Second, "cut off by the read timeout, not the test's deadline")
	t.Logf("after %v the server sent %q and closed", time.Since(start).Round(time.Millisecond), got)
	assert.True(t, strings.HasPrefix(string(got), "HTTP/1.1 408 Request Timeout\r\n"), "%q", got)
	assert.Contains(t, string(got), `{"error":"api: request not read in time"}`)
}
