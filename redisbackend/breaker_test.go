package redisbackend

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestBreaker drives the circuit with a fake clock: closed lets everything
// through; the first failure opens it; open lets one probe through per
// interval; a success closes it.
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
		{"second failure is not news", 11 * time.Millisecond, b.failure, false, false},
		{"open: refused before the interval", 50 * time.Millisecond, b.allow, false, false},
		{"open: refused just before", 109 * time.Millisecond, b.allow, false, false},
		{"open: one probe at the interval", 110 * time.Millisecond, b.allow, true, false},
		{"open: only one probe", 110 * time.Millisecond, b.allow, false, false},
		{"open: none until the next interval", 209 * time.Millisecond, b.allow, false, false},
		{"open: the next probe", 210 * time.Millisecond, b.allow, true, false},
		{"a success closes", 211 * time.Millisecond, b.success, true, true},
		{"closed again: allowed", 212 * time.Millisecond, b.allow, true, true},
	}
	for _, s := range steps {
		at(s.at)
		assert.Equal(t, s.want, s.do(), s.name)
		assert.Equal(t, s.wantU, b.up(), s.name+": up")
	}
}
