package client

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

func TestDecodeBatchAnswer(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
	}{
		{"the API's shape", `[{"allowed":true,"status":"ok","id":"u1","count":3,"limit":10,"remaining":7,"reset_ms":412,"retry_after_ms":0,"delay_ms":250},` +
			`{"allowed":false,"status":"fail","id":"u\"2\u00e9","count":11,"limit":10,"remaining":0,"reset_ms":412,"retry_after_ms":412,"delay_ms":0}]`},
		{"an answer before delay_ms", `[{"allowed":true,"status":"ok","id":"u1","count":3,"limit":10,"remaining":7,"reset_ms":412,"retry_after_ms":0}]`},
		{"empty", `[]`},
		{"white space", " [ {\"allowed\" : true , \"count\" :\t-5 } ]\n"},
		{"empty object", `[{}]`},
		{"unknown keys skipped", `[{"x":null,"y":1.5e3,"z":"é","count":1}]`},
		{"non-ASCII id", `[{"id":"ünïcode","count":2}]`},
		{"duplicate key: the last wins", `[{"count":1,"count":2}]`},
		{"key in another case", `[{"Count":7}]`},
		{"escaped key", `[{"c\u006funt":7}]`},
		{"nested unknown value", `[{"x":{"a":[1]},"count":1}]`},
		{"null element", `[null,{"count":1}]`},
		{"null field", `[{"count":null}]`},
		{"float field", `[{"count":1.0}]`},
		{"string field", `[{"count":"1"}]`},
		{"overflow", `[{"count":9223372036854775808}]`},
		{"most negative", `[{"count":-9223372036854775808}]`},
		{"largest", `[{"count":9223372036854775807}]`},
		{"bad escape", `[{"id":"\x"}]`},
		{"control character", "[{\"id\":\"a\x01\"}]"},
		{"trailing data", `[]x`},
		{"trailing comma", `[{"count":1},]`},
		{"not an array", `{"count":1}`},
		{"leading zero", `[{"count":01}]`},
		{"null body", `null`},
		{"empty body", ``},
		{"number element", `[1]`},
		{"allowed not a boolean", `[{"allowed":"yes"}]`},
		{"allowed null", `[{"allowed":true,"allowed":null}]`},
		{"key folded by Unicode", "[{\"\u017fcount\":1,\"reset_m\u017f\":4}]"},
		{"lone surrogate in an unknown string", `[{"x":"\ud800","count":1}]`},
		{"invalid UTF-8 in an unknown string", "[{\"x\":\"\xff\",\"count\":1}]"},
		{"two values", `[] []`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, wantErr := wireDecisions([]byte(tc.body))
			got, err := decodeBatchAnswer([]byte(tc.body), make([]rl.Decision, 3))
			if wantErr != nil {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, len(want), len(got))
			if len(want) > 0 {
				assert.Equal(t, want, got)
			}
		})
	}
}

func TestAppendBatchJSON(t *testing.T) {
	rs := []rl.Request{
		{ID: "u1", Scale: time.Second, Limit: 10, Hits: 1},
		{ID: `q"uote\ <tag> & é ` + "\t", Scale: time.Minute, Limit: 0, Hits: 0, Peek: true, Algo: rl.Token},
		{ID: strings.Repeat("x", 100), Scale: check.MaxScale, Limit: check.MaxLimit, Hits: check.MaxHits, Algo: rl.Sliding},
	}
	b := appendBatchJSON(nil, rs)
	got, err := wireRequests(b)
	require.NoError(t, err, "%s", b)
	// The wire has no peek field: hits 0 is a peek, and an absent or zero
	// Hits goes out as 1.
	rs[1].Peek = false
	assert.Equal(t, rs, got)
	got, err = wireRequests(appendBatchJSON(nil, []rl.Request{{ID: "z", Scale: time.Second, Limit: 1}}))
	require.NoError(t, err)
	assert.Equal(t, int64(1), got[0].Hits, "the zero Hits counts one")
	assert.Contains(t, string(b), `{"id":"q\"uote\\ <tag> & é \t","scale":`, "ids escaped where JSON requires it, and only there")
}

// FuzzDecodeBatchAnswer: whatever the body, the batch decoder gives what
// encoding/json gives (the same decisions, or an error when it errs).
func FuzzDecodeBatchAnswer(f *testing.F) {
	f.Add([]byte(`[{"allowed":true,"status":"ok","id":"u1","count":3,"limit":10,"remaining":7,"reset_ms":412,"retry_after_ms":0,"delay_ms":600}]`))
	f.Add([]byte(`[{"allowed":false,"status":"fail","id":"a\"b\\c\u00e9","count":-1,"x":null,"y":1.5e-3}]`))
	f.Add([]byte(`[{"ALLOWED":true},{}]`))
	f.Add([]byte(`[{"count":9223372036854775807},{"count":-9223372036854775808}]`))
	f.Add([]byte(`[{"count":92233720368547758070}]`))
	f.Add([]byte(`[null]`))
	f.Add([]byte(` [ ] `))
	f.Add([]byte(`[{"id":"\ud800"}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		want, wantErr := wireDecisions(body)
		got, err := decodeBatchAnswer(body, nil)
		if wantErr != nil {
			require.Error(t, err, "accepted what encoding/json refuses")
			return
		}
		require.NoError(t, err)
		require.Equal(t, len(want), len(got))
		for i := range want {
			require.Equal(t, want[i], got[i], "decision %d", i)
		}
	})
}

// wireDecisions decodes a /check_rates answer with encoding/json, the
// reference the decoder is held to.
func wireDecisions(body []byte) ([]rl.Decision, error) {
	var wire []*struct {
		Allowed                 bool
		Count, Limit, Remaining int64
		ResetMS                 int64 `json:"reset_ms"`
		RetryAfterMS            int64 `json:"retry_after_ms"`
		DelayMS                 int64 `json:"delay_ms"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		return nil, err
	}
	var out []rl.Decision
	for _, w := range wire {
		var d rl.Decision
		if w != nil {
			d = millis.Decision{Allowed: w.Allowed, Count: w.Count, Limit: w.Limit, Remaining: w.Remaining,
				ResetMS: w.ResetMS, RetryAfterMS: w.RetryAfterMS, DelayMS: w.DelayMS}.Public()
			d.Now = time.Time{}
		}
		out = append(out, d)
	}
	return out, nil
}

// wireRequests decodes a /check_rates body with encoding/json.
func wireRequests(body []byte) ([]rl.Request, error) {
	var wire []struct {
		ID                 string
		Scale, Limit, Hits int64
		Algo               check.AlgoName
		Slices, Queue      int64
		MaxDelayMS         int64 `json:"max_delay_ms"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		return nil, err
	}
	var out []rl.Request
	for _, w := range wire {
		out = append(out, millis.Request{ID: w.ID, Scale: w.Scale, Limit: w.Limit, Hits: w.Hits, Algo: rl.Algo(w.Algo),
			Slices: w.Slices, Queue: w.Queue, MaxDelayMS: w.MaxDelayMS}.Public())
	}
	return out, nil
}
