package actor_test

import (
	"sync"
	"testing"
	"time"

	"github.com/raterlimiter/raterlimiter/actor"
)

// fakeClocks is a wall clock (Unix ms) that tests step both ways and a
// monotonic clock that only moves forward with advance.
type fakeClocks struct {
	wall int64
	mono time.Duration
}

func (f *fakeClocks) advance(d time.Duration) {
	f.mono += d
	f.wall += d.Milliseconds()
}

func newSteady(f *fakeClocks) *actor.SteadyClock {
	return actor.NewSteadyClock(func() int64 { return f.wall }, func() time.Duration { return f.mono })
}

func TestSteadyClockFollowsTheWallClock(t *testing.T) {
	f := &fakeClocks{wall: t0}
	c := newSteady(f)
	for i := range 100 {
		f.advance(137 * time.Millisecond)
		if got, want := c.Now(), f.wall; got != want {
			t.Fatalf("step %d: Now() = %d, want the wall clock %d", i, got, want)
		}
	}
}

func TestSteadyClockIgnoresACorrectedForwardJump(t *testing.T) {
	f := &fakeClocks{wall: t0}
	c := newSteady(f)
	f.advance(time.Second)
	before := c.Now()
	f.wall += int64(time.Hour / time.Millisecond) // a wrong step forward
	for range 10 {
		f.advance(time.Second)
		got := c.Now()
		if got != before+1000 {
			t.Fatalf("during the jump Now() = %d, want %d (monotonic)", got, before+1000)
		}
		before = got
	}
	f.wall -= int64(time.Hour / time.Millisecond) // corrected
	f.advance(time.Second)
	if got, want := c.Now(), f.wall; got != want {
		t.Fatalf("after the correction Now() = %d, want the wall clock %d", got, want)
	}
}

func TestSteadyClockIgnoresACorrectedBackwardJump(t *testing.T) {
	f := &fakeClocks{wall: t0}
	c := newSteady(f)
	f.advance(time.Second)
	before := c.Now()
	f.wall -= int64(time.Hour / time.Millisecond) // a wrong step back
	for range 10 {
		f.advance(time.Second)
		got := c.Now()
		if got != before+1000 {
			t.Fatalf("during the jump Now() = %d, want %d: neither frozen nor rewound", got, before+1000)
		}
		before = got
	}
	f.wall += int64(time.Hour / time.Millisecond)
	f.advance(time.Second)
	if got, want := c.Now(), f.wall; got != want {
		t.Fatalf("after the correction Now() = %d, want the wall clock %d", got, want)
	}
}

func TestSteadyClockAdoptsALastingForwardStep(t *testing.T) {
	f := &fakeClocks{wall: t0}
	c := newSteady(f)
	c.Now()
	f.wall += 10 * 60 * 1000 // the wall clock was ten minutes slow
	c.Now()                  // the step is seen
	f.advance(30 * time.Second)
	if got := c.Now(); got != f.wall-10*60*1000 {
		t.Fatalf("before the settle period Now() = %d, want %d", got, f.wall-10*60*1000)
	}
	f.advance(30 * time.Second)
	if got := c.Now(); got != f.wall {
		t.Fatalf("after the settle period Now() = %d, want the wall clock %d", got, f.wall)
	}
}

func TestSteadyClockSlewsToALastingBackwardStep(t *testing.T) {
	f := &fakeClocks{wall: t0}
	c := newSteady(f)
	c.Now()
	const step = 10 * 1000 // the wall clock was ten seconds fast
	f.wall -= step
	prev := c.Now()
	for i := 0; ; i++ {
		f.advance(time.Second)
		got := c.Now()
		if got <= prev {
			t.Fatalf("step %d: Now() = %d after %d: time stopped or ran back", i, got, prev)
		}
		if d := got - prev; d != 1000 && d != 500 {
			t.Fatalf("step %d: advanced %d ms in a second, want 1000 (monotonic) or 500 (slewing)", i, d)
		}
		prev = got
		if got-f.wall <= 1000 {
			break // within the tolerance: followed from now on
		}
		if i > 200 {
			t.Fatalf("still %d ms ahead of the wall clock after %d s", got-f.wall, i)
		}
	}
	for range 30 {
		f.advance(time.Second)
		prev = c.Now()
	}
	if prev != f.wall {
		t.Fatalf("Now() = %d, want the wall clock %d once caught up", prev, f.wall)
	}
}

func TestSteadyClockSmallDriftFollowedWithoutRewinding(t *testing.T) {
	f := &fakeClocks{wall: t0}
	c := newSteady(f)
	prev := c.Now()
	for i, w := range []int64{+300, -400, +900, -900, +50} {
		f.wall += w
		f.advance(200 * time.Millisecond)
		got := c.Now()
		if got <= prev {
			t.Fatalf("step %d (wall %+d ms): Now() = %d after %d", i, w, got, prev)
		}
		if d := got - f.wall; d < -1000 || d > 1000 {
			t.Fatalf("step %d: %d ms from the wall clock, past the tolerance", i, d)
		}
		prev = got
	}
}

// TestSteadyClockOfTheSystemNeverDecreasesUnderConcurrentReaders: the
// system's clocks are read outside the clock's mutex, so readers may
// arrive in another order than they read; each reader still sees its
// readings never decrease, and the clock stays within the tolerance of
// the wall clock.
func TestSteadyClockOfTheSystemNeverDecreasesUnderConcurrentReaders(t *testing.T) {
	c := actor.NewSteadyClock(nil, nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			last := c.Now()
			for range 20_000 {
				now := c.Now()
				if now < last {
					t.Errorf("reading %d after %d", now, last)
					return
				}
				last = now
			}
		})
	}
	wg.Wait()
	if d := c.Now() - time.Now().UnixMilli(); d < -actor.DefaultClockTolerance.Milliseconds() || d > actor.DefaultClockTolerance.Milliseconds() {
		t.Errorf("%d ms off the wall clock", d)
	}
}
