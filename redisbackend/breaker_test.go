package redisbackend

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestBreaker drives the circuit with a fake clock: closed lets everything
// through; the first failure opens it; open lets one probe through an
// interval after the last failure; a success closes it. A sequential
// caller whose every call came an interval after the last failed probe
// would be a probe each time, and never get the fail mode's answer.
func TestBreaker(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	now := t0
	b := &breaker{interval: 100 * time.Millisecond, now: func() time.Time { return now }}
	at := func(d time.Duration) { now = t0.Add(d) }

	steps := []struct {
		name  string
		at    time.Duration
		do    func() bool
		want  bool
		wantU bool // up afterwards
	}{
		{"closed: allowed", 0, b.allow, true, true},
		{"closed: allowed again", 0, b.allow, true, true},
		{"success while closed changes nothing", 0, b.success, false, true},
		{"first failure opens", 10 * time.Millisecond, b.failure, true, false},
		{"second failure is not news, but starts the interval again", 11 * time.Millisecond, b.failure, false, false},
		{"open: refused before the interval", 50 * time.Millisecond, b.allow, false, false},
		{"open: refused an interval after the first failure", 110 * time.Millisecond, b.allow, false, false},
		{"open: one probe an interval after the last failure", 111 * time.Millisecond, b.allow, true, false},
		{"open: only one probe", 111 * time.Millisecond, b.allow, false, false},
		{"the probe fails after waiting its caller's deadline", 900 * time.Millisecond, b.failure, false, false},
		{"open: the call right after a failed probe is no probe", 901 * time.Millisecond, b.allow, false, false},
		{"open: the next probe, an interval after the failed one", time.Second, b.allow, true, false},
		{"a success closes", time.Second + time.Millisecond, b.success, true, true},
		{"closed again: allowed", 212 * time.Millisecond, b.allow, true, true},
	}
	for _, s := range steps {
		at(s.at)
		assert.Equal(t, s.want, s.do(), s.name)
		assert.Equal(t, s.wantU, b.up(), s.name+": up")
	}
}
