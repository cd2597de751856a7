package check_test

import (
	"strings"
	"testing"
	"time"

	json "github.com/go-json-experiment/json/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
)

func TestValidate(t *testing.T) {
	ok := rl.Request{ID: "u", Scale: time.Second, Limit: 5, Hits: 1}
	with := func(f func(*rl.Request)) rl.Request { r := ok; f(&r); return r }
	tests := []struct {
		name  string
		r     rl.Request
		field string // "" means valid
	}{
		{"ordinary", ok, ""},
		{"id of one byte", with(func(r *rl.Request) { r.ID = "x" }), ""},
		{"id at the limit", with(func(r *rl.Request) { r.ID = strings.Repeat("x", check.DefaultMaxIDBytes) }), ""},
		{"id past the limit", with(func(r *rl.Request) { r.ID = strings.Repeat("x", check.DefaultMaxIDBytes+1) }), "id"},
		{"empty id", with(func(r *rl.Request) { r.ID = "" }), "id"},
		{"scale 1", with(func(r *rl.Request) { r.Scale = time.Millisecond }), ""},
		{"scale of a fraction of a ms", with(func(r *rl.Request) { r.Scale = time.Second + time.Microsecond }), "scale"},
		{"scale under a ms", with(func(r *rl.Request) { r.Scale = time.Microsecond }), "scale"},
		{"scale 0", with(func(r *rl.Request) { r.Scale = 0 }), "scale"},
		{"largest scale", with(func(r *rl.Request) { r.Scale = check.MaxScale }), ""},
		{"scale past ten years", with(func(r *rl.Request) { r.Scale = check.MaxScale + time.Millisecond }), "scale"},
		{"limit 0", with(func(r *rl.Request) { r.Limit = 0 }), ""},
		{"limit -1", with(func(r *rl.Request) { r.Limit = -1 }), "limit"},
		{"largest limit", with(func(r *rl.Request) { r.Limit = check.MaxLimit }), ""},
		{"limit past 2^32-1", with(func(r *rl.Request) { r.Limit = check.MaxLimit + 1 }), "limit"},
		{"hits 0 peeks", with(func(r *rl.Request) { r.Hits = 0 }), ""},
		{"hits -1", with(func(r *rl.Request) { r.Hits = -1 }), "hits"},
		{"largest hits", with(func(r *rl.Request) { r.Hits = check.MaxHits }), ""},
		{"hits past 2^32-1", with(func(r *rl.Request) { r.Hits = check.MaxHits + 1 }), "hits"},
		{"unknown algo", with(func(r *rl.Request) { r.Algo = 6 }), "algo"},
		{"slices by default", with(func(r *rl.Request) { r.Algo = rl.Slices }), ""},
		{"slices at their fewest", with(func(r *rl.Request) { r.Algo, r.Slices = rl.Slices, check.MinSlices }), ""},
		{"slices at their most", with(func(r *rl.Request) { r.Algo, r.Slices = rl.Slices, check.MaxSlices }), ""},
		{"one slice", with(func(r *rl.Request) { r.Algo, r.Slices = rl.Slices, 1 }), "slices"},
		{"negative slices", with(func(r *rl.Request) { r.Algo, r.Slices = rl.Slices, -60 }), "slices"},
		{"slices past 600", with(func(r *rl.Request) { r.Algo, r.Slices = rl.Slices, check.MaxSlices+1 }), "slices"},
		{"more slices than ms in the scale", with(func(r *rl.Request) { r.Algo, r.Slices, r.Scale = rl.Slices, 600, time.Millisecond }), ""},
		{"slices with another algo", with(func(r *rl.Request) { r.Slices = 60 }), "slices"},
		{"leaky with no queue", with(func(r *rl.Request) { r.Algo = rl.Leaky }), ""},
		{"leaky at its longest queue", with(func(r *rl.Request) { r.Algo, r.Queue = rl.Leaky, check.MaxQueue }), ""},
		{"queue past its bound", with(func(r *rl.Request) { r.Algo, r.Queue = rl.Leaky, check.MaxQueue+1 }), "queue"},
		{"negative queue", with(func(r *rl.Request) { r.Algo, r.Queue = rl.Leaky, -1 }), "queue"},
		{"queue with another algo", with(func(r *rl.Request) { r.Algo, r.Queue = rl.Token, 3 }), "queue"},
		{"a queue draining in ten years", with(func(r *rl.Request) { r.Algo, r.Queue, r.Scale, r.Limit = rl.Leaky, 2, check.MaxScale, 2 }), ""},
		{"a queue draining in more than ten years", with(func(r *rl.Request) { r.Algo, r.Queue, r.Scale, r.Limit = rl.Leaky, 3, check.MaxScale, 2 }), "queue"},
		{"a queue of exactly ten years", with(func(r *rl.Request) { r.Algo, r.Queue, r.Scale, r.Limit = rl.Leaky, 3, check.MaxScale/3*2, 2 }), ""},
		{"a queue a third of a ms past ten years", with(func(r *rl.Request) {
			r.Algo, r.Queue, r.Scale, r.Limit = rl.Leaky, 3, check.MaxScale/3*2+time.Millisecond, 2
		}), "queue"},
		{"the longest queue at the longest scale", with(func(r *rl.Request) {
			r.Algo, r.Queue, r.Scale, r.Limit = rl.Leaky, check.MaxQueue, check.MaxScale, check.MaxLimit
		}), ""},
		{"a queue with limit 0", with(func(r *rl.Request) { r.Algo, r.Queue, r.Scale, r.Limit = rl.Leaky, check.MaxQueue, check.MaxScale, 0 }), ""},
		{"a bound on the delay", with(func(r *rl.Request) { r.Algo, r.MaxDelay = rl.Leaky, 10*time.Second }), ""},
		{"a bound on a delay that never comes", with(func(r *rl.Request) { r.MaxDelay = check.MaxScale }), ""},
		{"a negative bound on the delay", with(func(r *rl.Request) { r.MaxDelay = -time.Millisecond }), "max_delay_ms"},
		{"a bound on the delay past ten years", with(func(r *rl.Request) { r.MaxDelay = check.MaxScale + time.Millisecond }), "max_delay_ms"},
		{"a bound on the delay of a fraction of a ms", with(func(r *rl.Request) { r.MaxDelay = 1500 * time.Microsecond }), "max_delay_ms"},
		{"log at its largest limit", with(func(r *rl.Request) { r.Algo, r.Limit = rl.Log, check.MaxLogLimit }), ""},
		{"log past its largest limit", with(func(r *rl.Request) { r.Algo, r.Limit = rl.Log, check.MaxLogLimit+1 }), "limit"},
		{"fixed past the log's largest limit", with(func(r *rl.Request) { r.Limit = check.MaxLogLimit + 1 }), ""},
	}
	// The wire names a field as the HTTP API does; a Go caller reads the
	// Go field's name.
	goName := map[string]string{"id": "ID", "scale": "Scale", "limit": "Limit", "hits": "Hits", "algo": "Algo",
		"slices": "Slices", "queue": "Queue", "max_delay_ms": "MaxDelay"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, v := range []struct {
				validate func(rl.Request, int) error
				field    string
			}{{check.ValidateWire, tt.field}, {check.Validate, goName[tt.field]}} {
				err := v.validate(tt.r, 0)
				if tt.field == "" {
					require.NoError(t, err)
					continue
				}
				require.ErrorIs(t, err, rl.ErrInvalid)
				var fe *rl.FieldError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, v.field, fe.Field)
				assert.True(t, strings.HasPrefix(err.Error(), "raterlimiter: invalid "+v.field+": "), err.Error())
			}
		})
	}
	assert.Error(t, check.Validate(rl.Request{ID: "abc", Scale: time.Millisecond, Limit: 1}, 2), "a configured id bound")
	assert.Error(t, check.ValidateWire(rl.Request{ID: "abc", Scale: time.Millisecond, Limit: 1}, 2), "a configured id bound")
}

// TestValidateSpeaksGo: a Go caller reads its own values and Go's units;
// the wire keeps its words.
func TestValidateSpeaksGo(t *testing.T) {
	ok := rl.Request{ID: "u", Scale: time.Second, Limit: 5}
	with := func(f func(*rl.Request)) rl.Request { r := ok; f(&r); return r }
	for _, tt := range []struct {
		r           rl.Request
		goMsg, wire string
	}{
		{with(func(r *rl.Request) { r.Scale = 1500 * time.Microsecond }),
			"raterlimiter: invalid Scale: 1.5ms is not a whole number of milliseconds",
			"raterlimiter: invalid scale: must be an integer from 1 to 315360000000 (milliseconds)"},
		{with(func(r *rl.Request) { r.Scale = 0 }),
			"raterlimiter: invalid Scale: 0s is outside 1ms to ten years (87600h)",
			"raterlimiter: invalid scale: must be an integer from 1 to 315360000000 (milliseconds)"},
		{with(func(r *rl.Request) { r.ID = "abcd" }),
			"raterlimiter: invalid ID: is 4 bytes, more than the limiter's MaxIDBytes (3)",
			"raterlimiter: invalid id: must be at most 3 bytes"},
		{with(func(r *rl.Request) { r.Slices = 60 }),
			"raterlimiter: invalid Slices: is for Algo Slices only, not fixed",
			"raterlimiter: invalid slices: is for algo=slices only"},
		{with(func(r *rl.Request) { r.MaxDelay = 2500 * time.Microsecond }),
			"raterlimiter: invalid MaxDelay: 2.5ms is not a whole number of milliseconds",
			"raterlimiter: invalid max_delay_ms: must be an integer from 0 (no bound) to 315360000000"},
	} {
		assert.EqualError(t, check.Validate(tt.r, 3), tt.goMsg)
		assert.EqualError(t, check.ValidateWire(tt.r, 3), tt.wire)
	}
}

// TestAlgoName: the wire's names of the algorithms, read by ParseAlgo
// and written and read by AlgoName in JSON.
func TestAlgoName(t *testing.T) {
	for _, a := range check.Algos {
		b, err := check.AlgoName(a).MarshalText()
		require.NoError(t, err)
		assert.Equal(t, a.String(), string(b))
		var back check.AlgoName
		require.NoError(t, back.UnmarshalText(b))
		assert.Equal(t, a, rl.Algo(back))
		p, err := check.ParseAlgo(a.String())
		require.NoError(t, err)
		assert.Equal(t, a, p)
	}
	def, err := check.ParseAlgo("")
	require.NoError(t, err)
	assert.Equal(t, rl.Fixed, def, "the default")
	for _, bad := range []string{"Fixed", "gcra", " token", "sliding\x00", "slice", "leaky ", "6"} {
		_, err := check.ParseAlgo(bad)
		assert.ErrorIs(t, err, rl.ErrInvalid, "%q", bad)
		assert.EqualError(t, err, "raterlimiter: invalid algo: must be one of fixed, sliding, token, log, slices, leaky")
	}
	_, err = check.AlgoName(9).MarshalText()
	assert.Error(t, err)

	var w struct {
		Algo check.AlgoName `json:"algo"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"algo":"token"}`), &w))
	assert.Equal(t, rl.Token, rl.Algo(w.Algo))
	b, err := json.Marshal(w)
	require.NoError(t, err)
	assert.Equal(t, `{"algo":"token"}`, string(b))
	assert.Error(t, json.Unmarshal([]byte(`{"algo":2}`), &w), "a number is not a name")
}
