package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/memory"
)

var jsonSeeds = []string{
	`{"id":"u1","scale":60000,"limit":10}`,
	`{"id":"u1","scale":60000,"limit":10,"hits":0,"algo":"token"}`,
	` { "algo" : "sliding" , "limit" : 4294967295 , "scale" : 315360000000 , "id" : "\u00e9\ud83d\ude00" } `,
	`{"id":"a\"b\\c\/\b\f\n\r\t","scale":1,"limit":0}`,
	`{"id":"x","scale":1,"limit":1,"extra":{"a":[1,-2.5e-3,true,false,null,"s"]}}`,
	`{"id":"x","scale":01,"limit":1}`,
	`{"id":"x","scale":1.0,"limit":1}`,
	`{"id":"x","scale":-1,"limit":1}`,
	`{"id":"x","id":"y","scale":1,"limit":1}`,
	`{"id":"\ud800","scale":1,"limit":1}`,
	`{"id":"x","scale":99999999999999999999999,"limit":1}`,
	`{"id":"x","scale":1,"limit":1,}`,
	`[{"id":"x","scale":1,"limit":1}]`,
	`{}`,
	``,
	`{"id":"x","scale":1000,"limit":5,"algo":"leaky","queue":3,"wait":true,"max_delay_ms":250}`,
	`{"id":"x","scale":1000,"limit":5,"algo":"slices","slices":600,"wait":0}`,
	`{"id":"x","scale":1000,"limit":5,"algo":"slices","slices":1,"wait":2}`,
	`{"id":"x","scale":1000,"limit":5,"algo":"leaky","wait":"1"}`,
	`{"id":"x","scale":1000,"limit":5,"alog":"sliding"}`,
	`{"\u0061lgo":"token","id":"x","scale":1000,"limit":5}`,
	`{"Id":"x","scale":1000,"limit":5}`,
	`{"":0,"id":"x","scale":1000,"limit":5}`,
	`{"id":"x","scale":1000,"limit":5,"peek":true}`,
}

// knownNames are the names a check may hold, on the wire and in JSON.
var knownNames = map[string]bool{"id": true, "scale": true, "limit": true, "hits": true, "algo": true,
	"slices": true, "queue": true, "max_delay_ms": true, "wait": true, "policy": true}

// FuzzDecodeCheck compares the JSON decoder with encoding/json: whatever it
// accepts is valid JSON and decodes to the same values, and valid JSON
// objects are never refused as malformed.
func FuzzDecodeCheck(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	rs := newRules(check.DefaultMaxIDBytes)
	f.Fuzz(func(t *testing.T, in []byte) {
		var d jsonReader
		var r rl.Request
		var pc policyCheck
		var id []byte
		err := d.reset(in)
		if err == nil {
			id, _, err = d.check(&r, nil, check.DefaultMaxIDBytes, rs, &pc, new(checkOpts))
		}
		if err == nil {
			err = d.end()
		}
		if err != nil {
			fe, ok := err.(*rl.FieldError)
			require.True(t, ok, "%T %v", err, err)
			trimmed := bytes.TrimLeft(in, " \t\r\n")
			if fe.Field == "body" && json.Valid(in) && utf8.Valid(in) && len(trimmed) > 0 && trimmed[0] == '{' {
				assert.Contains(t, fe.Rule, "nested too deep", "valid JSON refused as malformed")
			}
			return
		}
		require.True(t, json.Valid(in), "accepted invalid JSON")
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(in, &m))
		for name := range m {
			assert.True(t, knownNames[name], "accepted the unknown field %q", name)
		}
		var wantID string
		require.NoError(t, json.Unmarshal(m["id"], &wantID))
		assert.Equal(t, wantID, string(id))
		for name, got := range map[string]int64{"scale": r.Scale.Milliseconds(), "limit": r.Limit, "hits": r.Hits} {
			raw, ok := m[name]
			if !ok {
				assert.Equal(t, "hits", name, "a required field was missing")
				assert.Equal(t, int64(1), got, "hits defaults to 1")
				continue
			}
			n, err := strconv.ParseInt(string(raw), 10, 64)
			require.NoError(t, err)
			assert.Equal(t, n, got, name)
		}
		if raw, ok := m["algo"]; ok {
			var a check.AlgoName
			require.NoError(t, json.Unmarshal(raw, &a))
			assert.Equal(t, rl.Algo(a), r.Algo)
		}
		for name, got := range map[string]int64{"slices": r.Slices, "queue": r.Queue, "max_delay_ms": r.MaxDelay.Milliseconds()} {
			if raw, ok := m[name]; ok {
				n, err := strconv.ParseInt(string(raw), 10, 64)
				require.NoError(t, err)
				assert.Equal(t, n, got, name)
			} else {
				assert.Zero(t, got, name)
			}
		}
	})
}

// FuzzAppendString checks the JSON string writer against encoding/json.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "u1", "a\"b\\c", "\x00\x1f\x7f", "\xff\xfe", "é\u2028\u2029😀", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := appendString(nil, s)
		var back string
		require.NoError(t, json.Unmarshal(out, &back), "%q", out)
		// encoding/json turns each invalid byte into U+FFFD.
		assert.Equal(t, replaceInvalid(s), back)
	})
}

func replaceInvalid(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\ufffd")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// fuzzServer is a server on a real embedded limiter.
func fuzzServer(t testing.TB) *Server {
	lim := memory.New(memory.Config{SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	// A leaky check's held answer waits at most a few ms, so the fuzzer
	// does not sleep.
	return New(Config{Limiter: lim, MaxBatch: 50, MaxWait: 5 * time.Millisecond})
}

// serve runs the handler on an in-memory request for path?query.
func serve(s *Server, method, path, query, contentType string, body []byte) *fasthttp.Response {
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.URI().SetPath(path)
	req.URI().SetQueryString(query)
	if contentType != "" {
		req.Header.SetContentType(contentType)
	}
	req.SetBody(body)
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, nil, nil)
	s.Handler(&ctx)
	var resp fasthttp.Response
	ctx.Response.CopyTo(&resp)
	return &resp
}

// checkAnswer asserts the shape of a /check_rate answer.
func checkAnswer(t *testing.T, resp *fasthttp.Response) {
	t.Helper()
	switch resp.StatusCode() {
	case 200, 429:
		var b struct {
			Allowed *bool   `json:"allowed"`
			Status  string  `json:"status"`
			ID      *string `json:"id"`
			IDB64   *[]byte `json:"id_b64"` // an id that is not UTF-8
		}
		require.NoError(t, json.Unmarshal(resp.Body(), &b), "%q", resp.Body())
		require.NotNil(t, b.Allowed)
		require.True(t, (b.ID == nil) != (b.IDB64 == nil), "the id, as text or as base64: %q", resp.Body())
		assert.Equal(t, resp.StatusCode() == 200, *b.Allowed)
		assert.NotEmpty(t, resp.Header.Peek("X-RateLimit-Reset"))
		// A 429 carries Retry-After unless no wait can let the check pass
		// (hits above the limit): headers.Retryable.
		if resp.StatusCode() == 200 {
			assert.Empty(t, resp.Header.Peek("Retry-After"))
		}
	case 400:
		var e struct{ Error, Field, Rule string }
		require.NoError(t, json.Unmarshal(resp.Body(), &e), "%q", resp.Body())
		assert.NotEmpty(t, e.Field)
		assert.NotEmpty(t, e.Rule)
		assert.Contains(t, e.Error, e.Rule)
	default:
		t.Fatalf("status %d: %q", resp.StatusCode(), resp.Body())
	}
}

var querySeeds = []string{
	"id=u1&scale=60000&limit=10",
	"id=u1&scale=60000&limit=10&hits=0&algo=sliding",
	"id=%00%ff&scale=1&limit=0&algo=token",
	"id=u1&scale=+1&limit=1",
	"id=u1&scale=1&scale=2&limit=1",
	"id=&scale=1&limit=1",
	"scale=1&limit=1&_=12345",
	"id=u1&scale=315360000001&limit=4294967296&hits=-1",
	"id=u1&scale=1e3&limit=0x1",
	"id",
	"&&&=&",
	"id=q&scale=1000&limit=5&algo=leaky&queue=3&wait=1",
	"id=q&scale=1000&limit=5&algo=leaky&queue=65536&max_delay_ms=315360000000",
	"id=s&scale=3600000&limit=10&algo=slices&slices=60",
	"id=s&scale=1&limit=10&algo=slices&slices=601&wait=yes",
	"id=u1&scale=60000&limit=10&alog=sliding",
	"ID=u1&scale=60000&limit=10",
	"%61lgo=token&id=u1&scale=60000&limit=10",
	"id=u1&scale=60000&limit=10&=5",
	"id=u1&scale=60000&limit=10&a%00=1&%ff=2",
	"id=u1&scale=60000&limit=10&peek",
	"policy=p&id=u1&alog=sliding",
}

// FuzzCheckRateQuery sends any query string to GET /check_rate.
func FuzzCheckRateQuery(f *testing.F) {
	for _, s := range querySeeds {
		f.Add(s)
	}
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, q string) {
		resp := serve(s, "GET", "/check_rate", q, "", nil)
		checkAnswer(t, resp)
		// Whatever the handler accepted, the parser accepts alone.
		var args fasthttp.Args
		args.Parse(q)
		var r rl.Request
		var shown string
		pc := s.policyCheck()
		_, err := parseArgs(&args, &r, &shown, check.DefaultMaxIDBytes, s.rules, &pc, new(checkOpts))
		if err == nil {
			for k := range args.All() {
				assert.True(t, knownNames[string(k)], "accepted the unknown parameter %q", k)
			}
		}
		if err == nil && resp.StatusCode() == 400 {
			// Parsed, then refused by the store: the fuzzer has given this
			// id records of as many scales as it may have.
			assert.Contains(t, string(resp.Body()), "-max-scales-per-id")
			return
		}
		assert.Equal(t, err == nil, resp.StatusCode() != 400, "%v", err)
	})
}

// FuzzCheckRateForm posts any body as a form to /check_rate.
func FuzzCheckRateForm(f *testing.F) {
	for _, s := range querySeeds {
		f.Add([]byte(s))
	}
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAnswer(t, serve(s, "POST", "/check_rate", "", "application/x-www-form-urlencoded", body))
	})
}

// FuzzCheckRateJSON posts any body as JSON to /check_rate.
func FuzzCheckRateJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAnswer(t, serve(s, "POST", "/check_rate", "", "application/json", body))
	})
}

// FuzzCheckRates posts any body to the batch endpoint.
func FuzzCheckRates(f *testing.F) {
	for _, s := range []string{
		`[]`,
		`[{"id":"a","scale":1000,"limit":1},{"id":"b","scale":1000,"limit":0,"algo":"token"}]`,
		`[{"id":"a","scale":1000,"limit":1},{"id":"a","scale":0,"limit":1}]`,
		`[{"id":"a","scale":1000,"limit":1},]`,
		`{"id":"a","scale":1000,"limit":1}`,
		`[{"id":"a","scale":1000,"limit":1},{"id":"b","scale":1000,"limit":1,"alog":"token"}]`,
		`[{"id":"a","scale":1000,"limit":1,"\u0077ait":1}]`,
		`[` + strings.Repeat(`{"id":"a","scale":1000,"limit":1},`, 50) + `{"id":"a","scale":1000,"limit":1}]`,
	} {
		f.Add([]byte(s))
	}
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		resp := serve(s, "POST", "/check_rates", "", "application/json", body)
		switch resp.StatusCode() {
		case 200:
			var out []map[string]any
			require.NoError(t, json.Unmarshal(resp.Body(), &out))
			var in []map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(body, &in), "accepted a body that is not a JSON array of objects")
			assert.Len(t, out, len(in))
			for _, item := range in {
				for name := range item {
					assert.True(t, knownNames[name] && name != "wait", "accepted the field %q in a batch", name)
				}
			}
		case 400:
			var e struct {
				Error, Field, Rule string
			}
			require.NoError(t, json.Unmarshal(resp.Body(), &e))
			assert.NotEmpty(t, e.Field)
		case 413:
			// Refused once a 51st item begins, before reading it.
			assert.GreaterOrEqual(t, bytes.Count(body, []byte("{")), 50)
		default:
			t.Fatalf("status %d: %q", resp.StatusCode(), resp.Body())
		}
	})
}
