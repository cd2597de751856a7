package actor

import (
	"sync"
	"time"
)

// SteadyClock's tolerance and settle period.
const (
	// clockTolerance is how far the wall clock may drift from the
	// steady clock before a difference counts as a jump: smaller differences
	// are followed at once (forward by a step, backward by running at half
	// speed), so the steady clock stays within it of the wall clock.
	clockTolerance = time.Second
	// clockSettle is how long a jump of the wall clock must last
	// before the steady clock follows it. A jump corrected sooner (a wrong
	// NTP step, an operator's typo) is never seen by decisions.
	clockSettle = time.Minute
)

// SteadyClock is a clock in Unix milliseconds that advances with a monotonic
// clock and is anchored to a wall clock, so windows stay aligned with the
// wall clock while a wall-clock jump that is corrected within the settle
// period neither freezes nor rewinds decisions:
//
//   - The reading advances by the monotonic time elapsed since the last one.
//   - If the wall clock is ahead by no more than the tolerance, or has been
//     ahead by more for at least the settle period, the reading steps
//     forward to it (a lasting forward correction is adopted).
//   - If the wall clock is behind by no more than the tolerance, or has
//     been behind by more for at least the settle period, the reading
//     advances at half speed until the wall clock catches up: time never
//     runs backwards and never stops.
//   - Otherwise (a jump younger than the settle period) the reading follows
//     the monotonic clock alone.
//
// SteadyClock is safe for concurrent use. Make one with NewSteadyClock.
type SteadyClock struct {
	wall func() int64         // Unix ms
	mono func() time.Duration // monotonic, from any origin

	// sys is set when both clocks are the system's: one time.Now gives
	// both readings (each costs a clock_gettime, slow on some VMs).
	sys   bool
	start time.Time

	mu       sync.Mutex
	out      time.Duration // the reading, as time since the Unix epoch
	lastMono time.Duration
	since    time.Duration // monotonic time the current jump was first seen
	jumping  bool
}

// NewSteadyClock returns a steady clock that starts at wall() and advances
// with mono. Nil wall and mono mean the system's clocks.
func NewSteadyClock(wall func() int64, mono func() time.Duration) *SteadyClock {
	sys := wall == nil && mono == nil
	start := time.Now()
	if wall == nil {
		wall = func() int64 { return time.Now().UnixMilli() }
	}
	if mono == nil {
		mono = func() time.Duration { return time.Since(start) }
	}
	return &SteadyClock{
		sys:      sys,
		start:    start,
		wall:     wall,
		mono:     mono,
		out:      time.Duration(wall()) * time.Millisecond,
		lastMono: mono(),
	}
}

// Now returns the time in Unix milliseconds. Readings never decrease.
func (c *SteadyClock) Now() int64 {
	var m, w time.Duration
	if c.sys {
		t := time.Now()
		m, w = t.Sub(c.start), time.Duration(t.UnixMilli())*time.Millisecond
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.sys {
		m, w = c.mono(), time.Duration(c.wall())*time.Millisecond
	}
	if m < c.lastMono {
		// Read before another caller's later reading: time stands still
		// rather than going back.
		m = c.lastMono
	}
	dm := m - c.lastMono
	c.lastMono = m
	prev := c.out
	c.out += dm
	diff := (w - c.out).Milliseconds()
	tol := clockTolerance.Milliseconds()
	small := diff >= -tol && diff <= tol
	if small {
		c.jumping = false
	} else if !c.jumping {
		c.jumping, c.since = true, m
	}
	follow := small || m-c.since >= clockSettle
	switch {
	case !follow:
	case w > c.out:
		// Behind the wall clock, by a jump or by less than a millisecond
		// (diff rounds that to 0, and the reading would then lag the
		// wall clock's millisecond): catch up.
		c.out = w
	case diff < 0:
		c.out = max(prev+dm/2, w)
	}
	return c.out.Milliseconds()
}
