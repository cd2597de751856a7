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
		fast bool // the fast path takes it
	}{
		{"the API's shape", `[{"allowed":true,"status":"ok","id":"u1","count":3,"limit":10,"remaining":7,"reset_ms":412,"retry_after_ms":0},` +
			`{"allowed":false,"status":"fail","id":"u\"2\u00e9","count":11,"limit":10,"remaining":0,"reset_ms":412,"retry_after_ms":412}]`, true},
		{"empty", `[]`, true},
		{"white space", " [ {\"allowed\" : true , \"count\" :\t-5 } ]\n", true},
		{"empty object", `[{}]`, true},
		{"unknown keys skipped", `[{"x":null,"y":1.5e3,"z":"é","count":1}]`, true},
		{"non-ASCII id", `[{"id":"ünïcode","count":2}]`, true},
		{"duplicate key: the last wins", `[{"count":1,"count":2}]`, true},
		{"key in another case", `[{"Count":7}]`, false},
		{"escaped key", `[{"c\u006funt":7}]`, false},
		{"nested unknown value", `[{"x":{"a":[1]},"count":1}]`, false},
		{"null element", `[null,{"count":1}]`, false},
		{"null field", `[{"count":null}]`, false},
		{"float field", `[{"count":1.0}]`, false},
		{"string field", `[{"count":"1"}]`, false},
		{"overflow", `[{"count":9223372036854775808}]`, false},
		{"most negative", `[{"count":-9223372036854775808}]`, true},
		{"largest", `[{"count":9223372036854775807}]`, true},
		{"bad escape", `[{"id":"\x"}]`, false},
		{"control character", "[{\"id\":\"a\x01\"}]", false},
		{"trailing data", `[]x`, false},
		{"trailing comma", `[{"count":1},]`, false},
		{"not an array", `{"count":1}`, false},
		{"leading zero", `[{"count":01}]`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []rl.Decision
			wantErr := json.Unmarshal([]byte(tc.body), &want)
			_, fast := fastDecisions([]byte(tc.body), nil)
			assert.Equal(t, tc.fast, fast, "fast path")
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
		{ID: `q"uote\ <tag> & é ` + "\t", Scale: 60_000, Limit: 0, Hits: 0, Algo: rl.Token},
		{ID: strings.Repeat("x", 100), Scale: rl.MaxScale, Limit: rl.MaxLimit, Hits: rl.MaxHits, Algo: rl.Sliding},
	}
	b := appendBatchJSON(nil, rs)
	var got []rl.Request
	require.NoError(t, json.Unmarshal(b, &got), "%s", b)
	assert.Equal(t, rs, got)
	for _, r := range rs {
		q, err := json.Marshal(r.ID)
		require.NoError(t, err)
		assert.Contains(t, string(b), `{"id":`+string(q)+`,"scale":`, "ids written as encoding/json writes them")
	}
}

// FuzzDecodeBatchAnswer: whatever the body, the batch decoder gives what
// encoding/json gives (the same decisions, or an error when it errs), and
// its fast path accepts only bodies encoding/json accepts.
func FuzzDecodeBatchAnswer(f *testing.F) {
	f.Add([]byte(`[{"allowed":true,"status":"ok","id":"u1","count":3,"limit":10,"remaining":7,"reset_ms":412,"retry_after_ms":0}]`))
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
		fast, ok := fastDecisions(body, nil)
		if ok {
			require.NoError(t, wantErr, "the fast path accepted what encoding/json refuses")
			require.Equal(t, len(want), len(fast))
			for i := range want {
				require.Equal(t, want[i], fast[i], "decision %d", i)
			}
		}
		got, err := decodeBatchAnswer(body, nil)
		if wantErr != nil {
			require.Error(t, err)
			return
		}
		require.NoError(t, err)
		require.Equal(t, len(want), len(got))
		for i := range want {
			require.Equal(t, want[i], got[i], "decision %d", i)
		}
	})
}
