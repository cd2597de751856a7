package client

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
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
			var want []rl.Decision
			wantErr := json.Unmarshal([]byte(tc.body), &want)
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
		{ID: "u1", Scale: 1000, Limit: 10, Hits: 1},
		{ID: `q"uote\ <tag> & é ` + "\t", Scale: 60_000, Limit: 0, Hits: 0, Peek: true, Algo: rl.Token},
		{ID: strings.Repeat("x", 100), Scale: rl.MaxScale, Limit: rl.MaxLimit, Hits: rl.MaxHits, Algo: rl.Sliding},
	}
	b := appendBatchJSON(nil, rs)
	var got []rl.Request
	require.NoError(t, json.Unmarshal(b, &got), "%s", b)
	// The wire has no peek field: hits 0 is a peek, and an absent or zero
	// Hits goes out as 1.
	rs[1].Peek = false
	assert.Equal(t, rs, got)
	got = nil
	require.NoError(t, json.Unmarshal(appendBatchJSON(nil, []rl.Request{{ID: "z", Scale: 1000, Limit: 1}}), &got))
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
		var want []rl.Decision
		wantErr := json.Unmarshal(body, &want)
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
