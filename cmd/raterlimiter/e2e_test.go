package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
)

// binary is the raterlimiter built once for the end-to-end tests.
var binary struct {
	once sync.Once
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary.path != "" {
		os.RemoveAll(filepath.Dir(binary.path))
	}
	os.Exit(code)
}

// build compiles the real binary (once per test run).
func build(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	binary.once.Do(func() {
		dir, err := os.MkdirTemp("", "raterlimiter-e2e")
		if err != nil {
			binary.err = err
			return
		}
		binary.path = filepath.Join(dir, "raterlimiter")
		out, err := exec.Command("go", "build", "-o", binary.path, ".").CombinedOutput()
		if err != nil {
			binary.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, binary.err)
	return binary.path
}

// sidecar is a running raterlimiter process.
type sidecar struct {
	*tooltest.Proc
	base string // http://127.0.0.1:PORT
	addr string
}

// start runs the binary on a port the OS picks and waits for its start line.
func start(t testing.TB, env []string, args ...string) *sidecar {
	t.Helper()
	s := &sidecar{Proc: tooltest.Start(t, env, build(t), append([]string{"-listen", "127.0.0.1:0"}, args...)...)}
	s.addr = s.waitAddr(t, "raterlimiter", 30*time.Second)
	s.base = "http://" + s.addr
	return s
}

// listenAddr waits up to 10 s for the line `msg="<what> listening" addr=...`
// in the sidecar's log and returns its address.
func (s *sidecar) listenAddr(t testing.TB, what string) string {
	t.Helper()
	return s.waitAddr(t, what, 10*time.Second)
}

func (s *sidecar) waitAddr(t testing.TB, what string, timeout time.Duration) (addr string) {
	t.Helper()
	re := regexp.MustCompile(`msg="` + regexp.QuoteMeta(what) + ` listening" addr=(\S+)`)
	s.WaitUntil(t, timeout, what+"'s address in the log", func() bool {
		if m := re.FindStringSubmatch(s.logs()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	return addr
}

// logs returns what the sidecar has logged so far.
func (s *sidecar) logs() string { return s.Output() }

// stop sends SIGTERM and returns the exit error (nil for status 0).
func (s *sidecar) stop(t testing.TB) error {
	t.Helper()
	return s.Stop(t, syscall.SIGTERM)
}

type reply struct {
	status int
	header http.Header
	body   string
}

func (s *sidecar) do(t *testing.T, method, path, contentType, body string, hdr ...string) reply {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

func (s *sidecar) get(t *testing.T, path string) reply {
	t.Helper()
	return s.do(t, "GET", path, "", "")
}

// body is the JSON of a 200/429 answer.
type body struct {
	Allowed    bool   `json:"allowed"`
	Status     string `json:"status"`
	ID         string `json:"id"`
	IDB64      []byte `json:"id_b64"` // an id that is not UTF-8
	Count      int64  `json:"count"`
	Limit      int64  `json:"limit"`
	Remaining  int64  `json:"remaining"`
	Reset      int64  `json:"reset_ms"`
	RetryAfter int64  `json:"retry_after_ms"`
	Delay      int64  `json:"delay_ms"`
}

type errBody struct {
	Error string `json:"error"`
	Field string `json:"field"`
	Rule  string `json:"rule"`
	Index *int   `json:"index"`
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&v), s)
	return v
}

// wireCheck is one request in the three encodings the API takes.
type wireCheck struct {
	id                 string
	scale, limit, hits string // raw, as sent
	algo               string // "" leaves it out
}

func (c wireCheck) values() url.Values {
	v := url.Values{"id": {c.id}, "scale": {c.scale}, "limit": {c.limit}}
	if c.hits != "" {
		v.Set("hits", c.hits)
	}
	if c.algo != "" {
		v.Set("algo", c.algo)
	}
	return v
}

func (c wireCheck) json() string {
	b, _ := json.Marshal(c.id)
	s := `{"id":` + string(b) + `,"scale":` + c.scale + `,"limit":` + c.limit
	if c.hits != "" {
		s += `,"hits":` + c.hits
	}
	if c.algo != "" {
		s += `,"algo":"` + c.algo + `"`
	}
	return s + "}"
}

// send sends c as a query, a form or JSON.
func (s *sidecar) send(t *testing.T, how string, c wireCheck) reply {
	t.Helper()
	switch how {
	case "query":
		return s.get(t, "/check_rate?"+c.values().Encode())
	case "form":
		return s.do(t, "POST", "/check_rate", "application/x-www-form-urlencoded", c.values().Encode())
	}
	return s.do(t, "POST", "/check_rate", "application/json", c.json())
}

func i64(n int64) string { return strconv.FormatInt(n, 10) }

// TestE2EInputBounds sends each bound of the input table (docs/http-api.md) at its edge and
// one past it, as a query, a form and JSON.
func TestE2EInputBounds(t *testing.T) {
	s := start(t, nil, "-max-id-bytes", "16")
	const maxID, pastMax = "<max>", "<max+1>" // 16 and 17 bytes, fresh per encoding
	tests := []struct {
		name   string
		c      wireCheck
		status int
		field  string // of the 400
	}{
		{"id of 1 byte", wireCheck{id: "a", scale: "1000", limit: "1"}, 200, ""},
		{"id empty", wireCheck{id: "", scale: "1000", limit: "1"}, 400, "id"},
		{"id at max-id-bytes", wireCheck{id: maxID, scale: "1000", limit: "1"}, 200, ""},
		{"id one byte past", wireCheck{id: pastMax, scale: "1000", limit: "1"}, 400, "id"},
		{"scale 1", wireCheck{id: "s", scale: "1", limit: "1"}, 200, ""},
		{"scale 0", wireCheck{id: "s", scale: "0", limit: "1"}, 400, "scale"},
		{"scale max", wireCheck{id: "s", scale: i64(check.MaxScale.Milliseconds()), limit: "1"}, 200, ""},
		{"scale max+1", wireCheck{id: "s", scale: i64(check.MaxScale.Milliseconds() + 1), limit: "1"}, 400, "scale"},
		{"limit 0 denies", wireCheck{id: "l", scale: "1000", limit: "0"}, 429, ""},
		{"limit -1", wireCheck{id: "l", scale: "1000", limit: "-1"}, 400, "limit"},
		{"limit max", wireCheck{id: "lm", scale: "1000", limit: i64(check.MaxLimit)}, 200, ""},
		{"limit max+1", wireCheck{id: "l", scale: "1000", limit: i64(check.MaxLimit + 1)}, 400, "limit"},
		{"hits 0 peeks", wireCheck{id: "h", scale: "1000", limit: "0", hits: "0"}, 200, ""},
		{"hits -1", wireCheck{id: "h", scale: "1000", limit: "1", hits: "-1"}, 400, "hits"},
		{"hits max", wireCheck{id: "hm", scale: "1000", limit: i64(check.MaxLimit), hits: i64(check.MaxHits)}, 200, ""},
		{"hits max+1", wireCheck{id: "h", scale: "1000", limit: i64(check.MaxLimit), hits: i64(check.MaxHits + 1)}, 400, "hits"},
		{"algo fixed", wireCheck{id: "af", scale: "1000", limit: "1", algo: "fixed"}, 200, ""},
		{"algo sliding", wireCheck{id: "as", scale: "1000", limit: "1", algo: "sliding"}, 200, ""},
		{"algo token", wireCheck{id: "at", scale: "1000", limit: "1", algo: "token"}, 200, ""},
		{"algo unknown", wireCheck{id: "a", scale: "1000", limit: "1", algo: "gcra"}, 400, "algo"},
	}
	for _, how := range []string{"query", "form", "json"} {
		for _, tt := range tests {
			t.Run(how+"/"+tt.name, func(t *testing.T) {
				c := tt.c
				switch c.id {
				case "":
				case maxID:
					c.id = how[:1] + strings.Repeat("é", 7) + "x"
				case pastMax:
					c.id = how[:1] + strings.Repeat("é", 7) + "xy"
				default:
					c.id = how + c.id // fresh counters per encoding
				}
				r := s.send(t, how, c)
				require.Equal(t, tt.status, r.status, r.body)
				if tt.status == 400 {
					e := decode[errBody](t, r.body)
					assert.Equal(t, tt.field, e.Field)
					assert.Contains(t, e.Error, tt.field)
					assert.NotEmpty(t, e.Rule)
					return
				}
				b := decode[body](t, r.body)
				assert.Equal(t, tt.status == 200, b.Allowed)
				assert.Equal(t, c.id, b.ID)
			})
		}
	}
}

// TestE2EIntegerSyntax refuses what is not plainly a decimal integer.
func TestE2EIntegerSyntax(t *testing.T) {
	s := start(t, nil)
	for _, raw := range []string{"", "+5", " 5", "5 ", "0x10", "1e3", "1.0", "5a", "99999999999999999999999"} {
		t.Run(strconv.Quote(raw), func(t *testing.T) {
			r := s.get(t, "/check_rate?id=x&scale=1000&limit="+url.QueryEscape(raw))
			require.Equal(t, 400, r.status, r.body)
			assert.Equal(t, "limit", decode[errBody](t, r.body).Field)
		})
	}
	r := s.get(t, "/check_rate?id=x&scale=1000&limit=1&limit=1")
	require.Equal(t, 400, r.status)
	assert.Equal(t, errBody{Error: "invalid limit: must be given once", Field: "limit", Rule: "must be given once"}, decode[errBody](t, r.body))
}

var (
	policyRE    = regexp.MustCompile(`^"default";q=(\d+);w=(\d+)$`)
	rateLimitRE = regexp.MustCompile(`^"default";r=(\d+);t=(\d+)$`)
)

func ceilDiv(ms int64) int64 { return (ms + 999) / 1000 }

// TestE2EHeaders checks every header's exact form against the body.
func TestE2EHeaders(t *testing.T) {
	s := start(t, nil)
	for _, tc := range []struct {
		name  string
		query string
		scale int64
	}{
		{"fixed", "id=hd&scale=60000&limit=2", 60000},
		{"sub-second window", "id=hs&scale=250&limit=2", 250},
		{"sliding", "id=hl&scale=10000&limit=2&algo=sliding", 10000},
		{"token", "id=ht&scale=10000&limit=2&algo=token", 10000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i < 4; i++ {
				before := time.Now().UnixMilli()
				r := s.get(t, "/check_rate?"+tc.query)
				after := time.Now().UnixMilli()
				b := decode[body](t, r.body)
				if b.Allowed {
					require.Equal(t, 200, r.status)
					assert.Equal(t, "ok", b.Status)
					assert.Zero(t, b.RetryAfter)
					assert.Empty(t, r.header.Values("Retry-After"), "Retry-After on 429 only")
				} else {
					require.Equal(t, 429, r.status)
					assert.Equal(t, "fail", b.Status)
					assert.Equal(t, []string{i64(max(1, ceilDiv(b.RetryAfter)))}, r.header.Values("Retry-After"))
				}
				assert.Equal(t, "application/json", r.header.Get("Content-Type"))
				assert.Equal(t, max(0, b.Limit-b.Count), b.Remaining)

				m := policyRE.FindStringSubmatch(r.header.Get("RateLimit-Policy"))
				require.NotNil(t, m, r.header.Get("RateLimit-Policy"))
				assert.Equal(t, "2", m[1])
				assert.Equal(t, i64(max(1, ceilDiv(tc.scale))), m[2])

				// On a 429, t= and X-RateLimit-Reset never come before the
				// moment Retry-After names (a sliding window can end first).
				until := b.Reset
				if !b.Allowed {
					until = max(until, b.RetryAfter, 1)
				}
				m = rateLimitRE.FindStringSubmatch(r.header.Get("RateLimit"))
				require.NotNil(t, m, r.header.Get("RateLimit"))
				assert.Equal(t, i64(b.Remaining), m[1])
				wantT := ceilDiv(b.Reset)
				if !b.Allowed {
					wantT = max(wantT, max(1, ceilDiv(b.RetryAfter)))
				}
				assert.Equal(t, i64(wantT), m[2])

				assert.Equal(t, []string{"2"}, r.header.Values("X-RateLimit-Limit"))
				assert.Equal(t, []string{i64(b.Remaining)}, r.header.Values("X-RateLimit-Remaining"))
				reset, err := strconv.ParseInt(r.header.Get("X-RateLimit-Reset"), 10, 64)
				require.NoError(t, err)
				// The sidecar's now lies between before and after.
				assert.GreaterOrEqual(t, reset, ceilDiv(before+until))
				assert.LessOrEqual(t, reset, ceilDiv(after+until))
			}
		})
	}
}

// TestE2EHeaderNamesOnTheWire reads the raw response: names as docs/http-api.md spells them.
func TestE2EHeaderNamesOnTheWire(t *testing.T) {
	s := start(t, nil)
	require.Equal(t, 200, s.get(t, "/check_rate?id=w&scale=60000&limit=1").status)
	c, err := net.Dial("tcp", s.addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET /check_rate?id=w&scale=60000&limit=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	require.NoError(t, err)
	raw, err := io.ReadAll(c)
	require.NoError(t, err)
	head, _, _ := strings.Cut(string(raw), "\r\n\r\n")
	assert.True(t, strings.HasPrefix(head, "HTTP/1.1 429 Too Many Requests\r\n"), head)
	for _, name := range []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"} {
		assert.Regexp(t, `\r\n`+name+`: \S`, head)
	}
}

// TestE2EBadInputLeavesCountersIntact throws every kind of bad request at an
// id with live counters and checks nothing moved.
func TestE2EBadInputLeavesCountersIntact(t *testing.T) {
	s := start(t, nil)
	for range 3 {
		require.Equal(t, 200, s.get(t, "/check_rate?id=keep&scale=600000&limit=10").status)
		require.Equal(t, 200, s.get(t, "/check_rate?id=keep&scale=600000&limit=10&algo=token").status)
		require.Equal(t, 200, s.get(t, "/check_rate?id=keep&scale=600000&limit=10&algo=sliding").status)
	}
	records := s.get(t, "/buckets?id=keep").body
	bad := []struct{ method, path, ct, body string }{
		{"GET", "/check_rate?id=keep&scale=0&limit=10", "", ""},
		{"GET", "/check_rate?id=keep&scale=600000&limit=-1", "", ""},
		{"GET", "/check_rate?id=keep&scale=600000&limit=10&hits=4294967296", "", ""},
		{"GET", "/check_rate?id=keep&scale=600000&limit=10&algo=nope", "", ""},
		{"GET", "/check_rate?id=keep&id=keep&scale=600000&limit=10", "", ""},
		{"GET", "/check_rate?id=keep&scale=600000", "", ""},
		{"POST", "/check_rate", "application/json", `{"id":"keep","scale":600000,"limit":10`},
		{"POST", "/check_rate", "application/json", `{"id":"keep","scale":600000,"limit":10.5}`},
		{"POST", "/check_rate", "application/json", "\x00\xff garbage"},
		{"POST", "/check_rate", "application/x-www-form-urlencoded", "id=keep&scale=600000&limit=%zz"},
		{"POST", "/check_rate", "text/plain", "id=keep&scale=600000&limit=10"},
		{"POST", "/check_rates", "", `[{"id":"keep","scale":600000,"limit":10},{"id":"keep","scale":0,"limit":10}]`},
		{"POST", "/check_rates", "", `[{"id":"keep","scale":600000,"limit":10}`},
		{"PUT", "/check_rate?id=keep&scale=600000&limit=10", "", ""},
		{"DELETE", "/check_rate?id=keep&scale=600000&limit=10", "", ""},
		{"GET", "/check_rate/?id=keep&scale=600000&limit=10", "", ""},
		{"GET", "/check_rates?id=keep&scale=600000&limit=10", "", ""},
		{"DELETE", "/buckets?id=keep&scale=0", "", ""},
	}
	for _, b := range bad {
		r := s.do(t, b.method, b.path, b.ct, b.body)
		assert.Contains(t, []int{400, 404, 405}, r.status, "%s %s: %s", b.method, b.path, r.body)
	}
	assert.JSONEq(t, records, s.get(t, "/buckets?id=keep").body, "bad input moved a counter")
	r := s.get(t, "/check_rate?id=keep&scale=600000&limit=10&hits=0")
	assert.Equal(t, int64(3), decode[body](t, r.body).Count)
}

func TestE2ERoutes(t *testing.T) {
	s := start(t, nil)
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/", 404, ""},
		{"GET", "/check", 404, ""},
		{"GET", "/CHECK_RATE", 404, ""},
		{"PUT", "/check_rate", 405, "GET, POST"},
		{"PATCH", "/check_rate", 405, "GET, POST"},
		{"HEAD", "/check_rate", 405, "GET, POST"},
		{"GET", "/check_rates", 405, "POST"},
		{"PUT", "/buckets?id=a", 405, "GET, DELETE"},
		{"POST", "/healthz", 405, "GET, HEAD"},
		{"POST", "/metrics", 405, "GET, HEAD"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := s.do(t, tc.method, tc.path, "", "")
			assert.Equal(t, tc.status, r.status)
			assert.Equal(t, tc.allow, r.header.Get("Allow"))
			if tc.method != "HEAD" {
				assert.NotEmpty(t, decode[errBody](t, r.body).Error)
				assert.Equal(t, "application/json", r.header.Get("Content-Type"))
			}
		})
	}
	r := s.get(t, "/healthz")
	assert.Equal(t, 200, r.status)
	assert.Equal(t, "ok", r.body)
}

func TestE2EBatchAdminMetrics(t *testing.T) {
	s := start(t, []string{"RATERLIMITER_MAX_BATCH=3", "RATERLIMITER_ADMIN_TOKEN=fromenv"}, "-admin-token", "t0k")
	r := s.do(t, "POST", "/check_rates", "application/json",
		`[{"id":"b1","scale":60000,"limit":1},{"id":"b2","scale":60000,"limit":5,"hits":5},{"id":"b1","scale":60000,"limit":1}]`)
	require.Equal(t, 200, r.status, r.body)
	bs := decode[[]body](t, r.body)
	require.Len(t, bs, 3)
	assert.Equal(t, []bool{true, true, false}, []bool{bs[0].Allowed, bs[1].Allowed, bs[2].Allowed})
	assert.Equal(t, []string{"b1", "b2", "b1"}, []string{bs[0].ID, bs[1].ID, bs[2].ID})
	assert.Equal(t, []int64{1, 5, 2}, []int64{bs[0].Count, bs[1].Count, bs[2].Count})

	four := "[" + strings.TrimSuffix(strings.Repeat(`{"id":"b3","scale":60000,"limit":1},`, 4), ",") + "]"
	r = s.do(t, "POST", "/check_rates", "application/json", four)
	assert.Equal(t, 413, r.status, "RATERLIMITER_MAX_BATCH=3 applies")

	r = s.do(t, "POST", "/check_rates", "", `[{"id":"b4","scale":60000,"limit":1},{"id":"b4","scale":60000,"limit":1,"algo":"x"}]`)
	require.Equal(t, 400, r.status)
	e := decode[errBody](t, r.body)
	require.NotNil(t, e.Index)
	assert.Equal(t, 1, *e.Index)
	assert.Equal(t, "algo", e.Field)

	// Admin: the flag's token wins over the environment's.
	assert.Equal(t, 401, s.get(t, "/buckets?id=b1").status)
	assert.Equal(t, 401, s.do(t, "GET", "/buckets?id=b1", "", "", "Authorization", "Bearer fromenv").status)
	r = s.do(t, "GET", "/buckets?id=b1", "", "", "Authorization", "Bearer t0k")
	require.Equal(t, 200, r.status)
	var recs []millis.Bucket // the wire's form, in milliseconds
	require.NoError(t, json.Unmarshal([]byte(r.body), &recs))
	require.Len(t, recs, 1)
	assert.Equal(t, int64(60000), recs[0].Scale)
	assert.Equal(t, int64(2), recs[0].Count)
	r = s.do(t, "DELETE", "/buckets?id=b1", "", "", "Authorization", "Bearer t0k")
	assert.Equal(t, `{"deleted":1}`, r.body)
	r = s.get(t, "/check_rate?id=b1&scale=60000&limit=1")
	assert.Equal(t, 200, r.status, "reset gave b1 a fresh window")

	r = s.get(t, "/metrics")
	require.Equal(t, 200, r.status)
	for _, want := range []string{
		`raterlimiter_checks_total{algo="fixed",result="allowed",via="http"} 1`,
		`raterlimiter_checks_total{algo="fixed",result="allowed",via="batch"} 2`,
		`raterlimiter_checks_total{algo="fixed",result="denied",via="batch"} 1`,
		`raterlimiter_checks_total{algo="fixed",result="invalid",via="batch"} 1`,
		`raterlimiter_batch_size_count 1`,
		`raterlimiter_live_buckets 2`,
		`raterlimiter_actor_restarts_total 0`,
		`raterlimiter_mailbox_depth 0`,
		`raterlimiter_swept_buckets_total 0`,
		`raterlimiter_request_duration_seconds_bucket{endpoint="check_rate",le="+Inf"} 1`,
	} {
		assert.Contains(t, r.body, want)
	}
}

// runBinary runs the binary to its end and returns its exit code and output.
func runBinary(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return tooltest.RunEnv(t, env, build(t), args...)
}

func TestE2EStartFailures(t *testing.T) {
	s := start(t, nil)
	tests := []struct {
		name string
		env  []string
		args []string
		code int
		msg  string
	}{
		{"unknown flag", nil, []string{"-nope"}, 2, "flag provided but not defined: -nope"},
		{"bad duration", nil, []string{"-timeout", "soon"}, 2, `invalid value "soon" for flag -timeout`},
		{"bad env", []string{"RATERLIMITER_MAX_BATCH=many"}, nil, 2, "RATERLIMITER_MAX_BATCH"},
		{"bad backend", nil, []string{"-backend", "etcd"}, 2, "-backend must be memory or redis"},
		{"port in use", nil, []string{"-listen", s.addr}, 1, "address already in use"},
		{"env port in use", []string{"RATERLIMITER_LISTEN=" + s.addr}, nil, 1, "address already in use"},
		{"max-id-bytes out of range", nil, []string{"-max-id-bytes", "65537"}, 2, "-max-id-bytes must be from 1 to 65536"},
		{"a duration without a unit", nil, []string{"-timeout", "5"}, 2, `invalid value "5" for flag -timeout: a duration needs a unit: 5s, 5ms or 5m, say`},
		{"a duration without a unit in the environment", []string{"RATERLIMITER_SHUTDOWN_TIMEOUT=30"}, nil, 2, `invalid value "30" for RATERLIMITER_SHUTDOWN_TIMEOUT: a duration needs a unit: 30s`},
		{"stray argument", nil, []string{"serve"}, 2, `unexpected argument "serve"`},
		{"http redis url", nil, []string{"-backend", "redis", "-redis-url", "http://127.0.0.1:6379"}, 2, `invalid value "http://127.0.0.1:6379" for -redis-url`},
		{"redis flag with the memory backend", nil, []string{"-redis-fail", "open"}, 2, "-redis-fail applies only to -backend redis"},
		{"redis flag in the environment with the memory backend", []string{"RATERLIMITER_REDIS_FAIL=open"}, nil, 2, "-redis-fail applies only to -backend redis"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runBinary(t, tt.env, tt.args...)
			assert.Equal(t, tt.code, code, stderr)
			assert.Contains(t, stderr, tt.msg)
			assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
			assert.True(t, strings.HasPrefix(stderr, "raterlimiter: "), stderr)
		})
	}
}

func TestE2EHelpAndVersion(t *testing.T) {
	code, stdout, stderr := runBinary(t, nil, "-h")
	assert.Zero(t, code, stderr)
	for _, f := range []string{"listen", "sweep-interval", "backend", "redis-url", "admin-token", "max-id-bytes", "shards", "timeout", "max-batch", "shutdown-timeout"} {
		env := "RATERLIMITER_" + strings.ToUpper(strings.ReplaceAll(f, "-", "_"))
		assert.Regexp(t, `\n  -`+f+`( \w+)?  \(`+env+`, default .+\)\n        \S`, stdout)
	}
	assert.Contains(t, stdout, "\n  -version  (default false)\n        print the version and exit\n")
	assert.Contains(t, stdout, `default "127.0.0.1:8080"`)
	assert.Contains(t, stdout, `default 10s`)
	code, stdout, _ = runBinary(t, nil, "-version")
	assert.Zero(t, code)
	assert.Regexp(t, `^raterlimiter \S+( \([^)\n]*\))?\n$`, stdout)
	// The environment cannot ask for the version: with a bad flag beside
	// it, the binary reports the flag (it would have served otherwise).
	code, stdout, stderr = runBinary(t, []string{"RATERLIMITER_VERSION=true"}, "-max-batch", "-1")
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "-max-batch must not be negative")
}

// TestE2ESigtermDuringLoad sends SIGTERM while clients keep requests in
// flight: every request the sidecar took gets a whole answer, and it exits 0.
func TestE2ESigtermDuringLoad(t *testing.T) {
	s := start(t, nil)
	const workers = 16
	tr := &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	var (
		mu       sync.Mutex
		answered int
		refused  int
		reset    int // new connections reset unaccepted as the listener closed
		broken   []string
	)
	started := make(chan struct{}, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			first := true
			for i := 0; ; i++ {
				var reused bool
				trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
				req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET",
					fmt.Sprintf("%s/check_rate?id=w%d-%d&scale=60000&limit=100", s.base, w, i%50), nil)
				if err != nil {
					panic(err)
				}
				resp, err := client.Do(req)
				if err != nil {
					mu.Lock()
					defer mu.Unlock()
					switch {
					case errors.Is(err, syscall.ECONNREFUSED):
						// A closed listener refuses new connections: such
						// a request never reached the sidecar.
						refused++
					case !reused && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF)):
						// A connection the kernel had queued but the
						// sidecar had not yet accepted when its listener
						// closed is reset by the kernel: that request
						// never reached the sidecar either. (A request on
						// a kept-alive connection the sidecar closes is
						// sent again by the client, and meets the closed
						// listener.)
						reset++
					default:
						// Anything else means a request it took went
						// unanswered.
						broken = append(broken, fmt.Sprintf("%v (reused connection: %v)", err, reused))
					}
					return
				}
				b, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				ok := rerr == nil && (resp.StatusCode == 200 || resp.StatusCode == 429) && json.Valid(b)
				mu.Lock()
				if ok {
					answered++
				} else {
					broken = append(broken, fmt.Sprintf("status %d, body %q, read error %v", resp.StatusCode, b, rerr))
				}
				mu.Unlock()
				if first {
					started <- struct{}{}
					first = false
				}
				if !ok {
					return
				}
			}
		})
	}
	for range workers {
		<-started
	}

	// Requests in flight for certain: on kept-alive connections, send half
	// of a request before SIGTERM and the rest after the sidecar stopped
	// accepting; each must still get its whole answer. Each half carries
	// a header of padding, so the sidecar's count of request bytes held
	// shows when it has read all four halves (the workers' requests, some
	// hundred bytes each, cannot make up that much): a connection whose
	// request has begun is no longer idle, and shutdown waits for it.
	const halves = 4
	pad := strings.Repeat("p", 4000)
	conns := make([]net.Conn, halves)
	readers := make([]*bufio.Reader, halves)
	for i := range conns {
		c, err := net.Dial("tcp", s.addr)
		require.NoError(t, err)
		defer c.Close()
		conns[i], readers[i] = c, bufio.NewReader(c)
		_, err = fmt.Fprintf(c, "GET /check_rate?id=half%d&scale=60000&limit=5 HTTP/1.1\r\nHost: x\r\n\r\n", i)
		require.NoError(t, err)
		resp, err := http.ReadResponse(readers[i], nil)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		_, err = fmt.Fprintf(c, "GET /check_rate?id=half%d&scale=60000&limit=5 HTTP/1.1\r\nX-Pad: %s\r\nHo", i, pad)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		m := regexp.MustCompile(`(?m)^raterlimiter_request_bytes_held (\S+)$`).FindStringSubmatch(s.get(t, "/metrics").body)
		require.NotNil(t, m, "raterlimiter_request_bytes_held in /metrics")
		n, err := strconv.ParseFloat(m[1], 64)
		return err == nil && n >= halves*float64(len(pad))
	}, 30*time.Second, 5*time.Millisecond, "the sidecar reads the four halves")
	require.NoError(t, s.Cmd.Process.Signal(syscall.SIGTERM))
	for { // until the listener is closed: shutdown has begun
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		time.Sleep(5 * time.Millisecond)
	}
	for i, c := range conns {
		_, err := io.WriteString(c, "st: x\r\n\r\n")
		require.NoError(t, err)
		resp, err := http.ReadResponse(readers[i], nil)
		require.NoError(t, err, "request %d, half sent before SIGTERM, went unanswered", i)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, int64(2), decode[body](t, string(b)).Count)
		assert.True(t, resp.Close, "the last answer on a connection closes it")
	}
	err := s.Wait(t, 30*time.Second)
	wg.Wait()
	assert.NoError(t, err, "exit status 0 after SIGTERM\n%s", s.logs())
	assert.Empty(t, broken, "requests without a whole answer")
	assert.Equal(t, workers, refused+reset, "every worker ends on a connection the sidecar never accepted")
	t.Logf("answered %d requests, then %d workers were refused a new connection and %d had one reset unaccepted", answered, refused, reset)
	assert.Greater(t, answered, workers)
	assert.Contains(t, s.logs(), `msg="raterlimiter stopped"`)
}
