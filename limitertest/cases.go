package limitertest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// tcase is one scenario: steps run in order against a fresh limiter whose
// clock starts at Start.
type tcase struct {
	Name  string
	Start int64
	Steps []step
}

// step moves the clock by Advance milliseconds, then either runs Do or checks
// Req and compares the decision with Want (every field but Now), or the error
// with WantErr (errors.Is).
type step struct {
	Advance int64
	Req     rl.Request
	Want    rl.Decision
	WantErr error
	Do      func(t *testing.T, l rl.Limiter)
}

func (c tcase) run(t *testing.T, l rl.Limiter, clock *Clock) {
	ctx := context.Background()
	for i, s := range c.Steps {
		clock.Advance(millis.Duration(s.Advance))
		if s.Do != nil {
			s.Do(t, l)
			continue
		}
		d, err := l.CheckRate(ctx, s.Req)
		if s.WantErr != nil {
			require.ErrorIsf(t, err, s.WantErr, "step %d: %+v", i, s.Req)
			continue
		}
		require.NoErrorf(t, err, "step %d: %+v", i, s.Req)
		d.Now = time.Time{}
		assert.Equalf(t, s.Want, d, "step %d at %d ms: %+v", i, clock.Now(), s.Req)
	}
}

// t0 is the start of most cases, in Unix milliseconds: a whole number of seconds and minutes, so
// windows of 1000 and 60000 ms begin there.
const t0 = 1_700_000_040_000

func req(id string, scale, limit, hits int64) rl.Request {
	return rl.Request{ID: id, Scale: millis.Duration(scale), Limit: limit, Hits: hits, Peek: hits == 0}
}

// allow and deny build expected fixed-window decisions.
func allow(count, limit, reset int64) rl.Decision {
	return rl.Decision{Allowed: true, Count: count, Limit: limit, Remaining: max(0, limit-count), Reset: millis.Duration(reset)}
}

func deny(count, limit, reset, retry int64) rl.Decision {
	return rl.Decision{Count: count, Limit: limit, Remaining: max(0, limit-count), Reset: millis.Duration(reset), RetryAfter: millis.Duration(retry)}
}

func fixedCases() []tcase {
	return []tcase{
		{Name: "fixed/limit is reached then denied", Start: t0, Steps: []step{
			{Req: req("u", 1000, 3, 1), Want: allow(1, 3, 1000)},
			{Advance: 100, Req: req("u", 1000, 3, 1), Want: allow(2, 3, 900)},
			{Advance: 100, Req: req("u", 1000, 3, 1), Want: allow(3, 3, 800)},
			{Advance: 100, Req: req("u", 1000, 3, 1), Want: deny(4, 3, 700, 700)},
		}},
		{Name: "fixed/limit 0 denies every hit", Start: t0, Steps: []step{
			{Req: req("u", 1000, 0, 1), Want: deny(1, 0, 1000, 1000)},
			{Advance: 1000, Req: req("u", 1000, 0, 1), Want: deny(1, 0, 1000, 1000)},
			{Req: req("u", 1000, 0, 0), Want: rl.Decision{Allowed: false, Count: 1, Reset: time.Second, RetryAfter: time.Second}},
		}},
		{Name: "fixed/peek on a fresh id", Start: t0, Steps: []step{
			{Req: req("u", 1000, 0, 0), Want: allow(0, 0, 1000)},
			{Req: req("u", 1000, 5, 0), Want: allow(0, 5, 1000)},
			{Req: req("u", 1000, 5, 1), Want: allow(1, 5, 1000)},
		}},
		{Name: "fixed/window changes exactly at a multiple of scale", Start: t0 + 998, Steps: []step{
			{Req: req("u", 1000, 1, 1), Want: allow(1, 1, 2)},
			{Advance: 1, Req: req("u", 1000, 1, 1), Want: deny(2, 1, 1, 1)},
			{Advance: 1, Req: req("u", 1000, 1, 1), Want: allow(1, 1, 1000)},
			{Advance: 999, Req: req("u", 1000, 1, 1), Want: deny(2, 1, 1, 1)},
			{Advance: 1, Req: req("u", 1000, 1, 1), Want: allow(1, 1, 1000)},
		}},
		{Name: "fixed/windows align to the epoch", Start: t0 + 59_999, Steps: []step{
			{Req: req("u", 60_000, 1, 1), Want: allow(1, 1, 1)},
			{Advance: 1, Req: req("u", 60_000, 1, 1), Want: allow(1, 1, 60_000)},
			{Req: req("v", 7, 1, 1), Want: allow(1, 1, 7-(t0+60_000)%7)},
		}},
		{Name: "fixed/denied hits count too", Start: t0, Steps: []step{
			{Req: req("u", 1000, 1, 1), Want: allow(1, 1, 1000)},
			{Req: req("u", 1000, 1, 1), Want: deny(2, 1, 1000, 1000)},
			{Req: req("u", 1000, 1, 1), Want: deny(3, 1, 1000, 1000)},
			{Req: req("u", 1000, 1, 0), Want: deny(3, 1, 1000, 1000)},
		}},
		{Name: "fixed/hits=N counts N", Start: t0, Steps: []step{
			{Req: req("u", 1000, 10, 4), Want: allow(4, 10, 1000)},
			{Req: req("u", 1000, 10, 6), Want: allow(10, 10, 1000)},
			{Req: req("u", 1000, 10, 1), Want: deny(11, 10, 1000, 1000)},
		}},
		{Name: "fixed/hits above the limit never pass", Start: t0, Steps: []step{
			{Req: req("u", 1000, 3, 4), Want: deny(4, 3, 1000, 1000)},
			{Advance: 1000, Req: req("u", 1000, 3, 4), Want: deny(4, 3, 1000, 1000)},
			{Req: req("u", 1000, 3, 0), Want: deny(4, 3, 1000, 1000)},
		}},
		{Name: "fixed/peek changes nothing", Start: t0, Steps: []step{
			{Req: req("u", 1000, 3, 1), Want: allow(1, 3, 1000)},
			{Req: req("u", 1000, 3, 0), Want: allow(1, 3, 1000)},
			{Req: req("u", 1000, 3, 0), Want: allow(1, 3, 1000)},
			{Req: req("u", 1000, 3, 1), Want: allow(2, 3, 1000)},
		}},
		{Name: "fixed/scales never collide", Start: t0, Steps: []step{
			{Req: req("u", 1000, 1, 1), Want: allow(1, 1, 1000)},
			{Req: req("u", 60_000, 2, 1), Want: allow(1, 2, 60_000)},
			{Req: req("u", 1000, 1, 1), Want: deny(2, 1, 1000, 1000)},
			{Req: req("u", 60_000, 2, 1), Want: allow(2, 2, 60_000)},
			{Req: req("u", 1001, 1, 1), Want: allow(1, 1, 1001-t0%1001)},
		}},
		{Name: "fixed/ids never collide", Start: t0, Steps: []step{
			{Req: req("a", 1000, 1, 1), Want: allow(1, 1, 1000)},
			{Req: req("ab", 1000, 1, 1), Want: allow(1, 1, 1000)},
			{Req: req("a\x00", 1000, 1, 1), Want: allow(1, 1, 1000)},
			{Req: req("A", 1000, 1, 1), Want: allow(1, 1, 1000)},
			{Req: req("a", 1000, 1, 1), Want: deny(2, 1, 1000, 1000)},
		}},
		{Name: "fixed/ids of any bytes", Start: t0, Steps: []step{
			{Req: req("a b/c?d=e&f%20#ü\x00\xff\"'{}[]", 1000, 1, 1), Want: allow(1, 1, 1000)},
			{Req: req("a b/c?d=e&f%20#ü\x00\xff\"'{}[]", 1000, 1, 1), Want: deny(2, 1, 1000, 1000)},
			{Req: req(strings.Repeat("x", check.DefaultMaxIDBytes), 1000, 1, 1), Want: allow(1, 1, 1000)},
		}},
		{Name: "fixed/bounds at their edges", Start: t0, Steps: []step{
			{Req: req("u", millis.MaxScale, 1, 1), Want: allow(1, 1, millis.MaxScale-t0%millis.MaxScale)},
			{Req: req("u", 1, check.MaxLimit, check.MaxHits), Want: allow(check.MaxHits, check.MaxLimit, 1)},
			{Req: req("u", 1, check.MaxLimit, 1), Want: deny(check.MaxHits+1, check.MaxLimit, 1, 1)},
			{Req: req("v", 1, 0, check.MaxHits), Want: deny(check.MaxHits, 0, 1, 1)},
		}},
	}
}

// invalid lists requests one past each bound, each with the field it breaks.
func invalid() []struct {
	field string
	r     rl.Request
} {
	ok := req("u", 1000, 5, 1)
	with := func(f func(*rl.Request)) rl.Request { r := ok; f(&r); return r }
	return []struct {
		field string
		r     rl.Request
	}{
		{"ID", with(func(r *rl.Request) { r.ID = "" })},
		{"ID", with(func(r *rl.Request) { r.ID = strings.Repeat("x", check.DefaultMaxIDBytes+1) })},
		{"Scale", with(func(r *rl.Request) { r.Scale = 0 })},
		{"Scale", with(func(r *rl.Request) { r.Scale = -time.Millisecond })},
		{"Scale", with(func(r *rl.Request) { r.Scale = time.Second + time.Nanosecond })},
		{"Scale", with(func(r *rl.Request) { r.Scale = check.MaxScale + time.Millisecond })},
		{"Limit", with(func(r *rl.Request) { r.Limit = -1 })},
		{"Limit", with(func(r *rl.Request) { r.Limit = check.MaxLimit + 1 })},
		{"Hits", with(func(r *rl.Request) { r.Hits = -1 })},
		{"Hits", with(func(r *rl.Request) { r.Hits = check.MaxHits + 1 })},
		{"Algo", with(func(r *rl.Request) { r.Algo = rl.Algo(7) })},
		{"Slices", with(func(r *rl.Request) { r.Slices = check.MaxSlices + 1 })},
		{"Queue", with(func(r *rl.Request) { r.Queue = check.MaxQueue + 1 })},
		{"MaxDelay", with(func(r *rl.Request) { r.MaxDelay = -time.Millisecond })},
	}
}

func commonCases() []tcase {
	var cs []tcase
	for _, a := range check.Algos {
		r := req("u", 1000, 5, 1)
		r.Algo = a
		if a == rl.Leaky {
			r.Queue = 10 // several checks at one instant queue up
		}
		peek := r
		peek.Hits, peek.Peek = 0, true
		cs = append(cs, tcase{Name: a.String() + "/invalid input is refused and counts nothing", Start: t0, Steps: []step{
			{Req: r, Want: allowAny(a, r)},
			{Do: func(t *testing.T, l rl.Limiter) {
				for _, bad := range invalid() {
					bad.r.Algo = max(bad.r.Algo, a)
					_, err := l.CheckRate(context.Background(), bad.r)
					require.ErrorIs(t, err, rl.ErrInvalid, "%+v", bad.r)
					var fe *rl.FieldError
					require.ErrorAs(t, err, &fe)
					assert.Equal(t, bad.field, fe.Field)
				}
			}},
			{Do: func(t *testing.T, l rl.Limiter) {
				d, err := l.CheckRate(context.Background(), peek)
				require.NoError(t, err)
				assert.Equal(t, int64(1), d.Count, "counts survive bad input")
			}},
		}})
		cs = append(cs, tcase{Name: a.String() + "/the zero Hits counts one; a peek is said", Start: t0, Steps: []step{
			{Do: func(t *testing.T, l rl.Limiter) {
				ctx := context.Background()
				zero := r
				zero.Hits = 0
				for i := range int64(2) {
					d, err := l.CheckRate(ctx, zero)
					require.NoError(t, err)
					assert.Equal(t, i+1, d.Count, "a Request without Hits counts one")
				}
				ds, err := l.CheckRates(ctx, []rl.Request{zero, peek})
				require.NoError(t, err)
				assert.Equal(t, []int64{3, 3}, counts(ds), "in a batch too")
				bad := peek
				bad.Hits = 1
				_, err = l.CheckRate(ctx, bad)
				var fe *rl.FieldError
				require.ErrorAs(t, err, &fe, "a peek that counts is a contradiction")
				assert.Equal(t, "Hits", fe.Field)
				d, err := l.CheckRate(ctx, peek)
				require.NoError(t, err)
				assert.Equal(t, int64(3), d.Count)
			}},
		}})
		cs = append(cs, tcase{Name: a.String() + "/batch decides in order, refuses a bad item whole", Start: t0, Steps: []step{
			{Do: func(t *testing.T, l rl.Limiter) {
				ctx := context.Background()
				rs := []rl.Request{r, r, peek, {ID: "other", Scale: time.Second, Limit: 5, Hits: 1, Algo: a, Queue: r.Queue}, r}
				ds, err := l.CheckRates(ctx, rs)
				require.NoError(t, err)
				require.Len(t, ds, len(rs))
				assert.Equal(t, []int64{1, 2, 2, 1, 3}, counts(ds))
				if a == rl.Leaky {
					assert.Equal(t, []int64{0, 200, 0, 0, 400}, delays(ds), "the queue's waits")
				} else {
					assert.Equal(t, []int64{0, 0, 0, 0, 0}, delays(ds), "only leaky delays")
				}
				bad := []rl.Request{r, r, {ID: "u", Scale: 0, Limit: 5, Hits: 1, Algo: a, Queue: r.Queue}}
				_, err = l.CheckRates(ctx, bad)
				var ie *rl.ItemError
				require.ErrorAs(t, err, &ie)
				assert.Equal(t, 2, ie.Index)
				require.ErrorIs(t, err, rl.ErrInvalid)
				d, err := l.CheckRate(ctx, peek)
				require.NoError(t, err)
				assert.Equal(t, int64(3), d.Count, "a refused batch counts nothing")
				ds, err = l.CheckRates(ctx, nil)
				require.NoError(t, err)
				assert.Empty(t, ds)
			}},
		}})
		cs = append(cs, tcase{Name: a.String() + "/inspect and reset", Start: t0, Steps: []step{
			{Do: func(t *testing.T, lim rl.Limiter) {
				ctx := context.Background()
				l, ok := lim.(admin)
				require.True(t, ok, "every backend has the admin calls (Buckets, Reset)")
				other := r
				other.Scale = time.Minute
				for _, x := range []rl.Request{r, r, other} {
					_, err := l.CheckRate(ctx, x)
					require.NoError(t, err)
				}
				bs, err := l.Buckets(ctx, "u")
				require.NoError(t, err)
				require.Len(t, bs, 2)
				assert.Equal(t, time.Second, bs[0].Scale)
				assert.Equal(t, time.Minute, bs[1].Scale)
				assert.Equal(t, a, bs[0].Algo)
				if a != rl.Token && a != rl.Leaky {
					assert.Equal(t, int64(2), bs[0].Count)
				}
				switch a {
				case rl.Token, rl.Leaky:
				case rl.Slices:
					// in its slice (on Redis a slice keeps its start only)
					assert.Equal(t, int64(t0/17), bs[0].Created.UnixMilli()/17)
				default:
					assert.Equal(t, time.UnixMilli(t0), bs[0].Created)
				}
				switch a {
				case rl.Fixed, rl.Sliding:
					assert.Equal(t, int64(t0/1000), bs[0].Bucket)
				case rl.Slices:
					assert.Equal(t, int64(t0/17), bs[0].Bucket, "1000 ms in 60 slices of 17 ms")
					assert.Equal(t, int64(60), bs[0].Slices)
				}
				none, err := l.Buckets(ctx, "nobody")
				require.NoError(t, err)
				assert.Empty(t, none)
				n, err := l.Reset(ctx, "u", time.Second)
				require.NoError(t, err)
				assert.Equal(t, 1, n)
				d, err := l.CheckRate(ctx, peek)
				require.NoError(t, err)
				assert.Equal(t, int64(0), d.Count, "reset of one scale")
				d, err = l.CheckRate(ctx, rl.Request{ID: "u", Scale: time.Minute, Limit: 5, Algo: a, Queue: r.Queue, Peek: true})
				require.NoError(t, err)
				assert.Equal(t, int64(1), d.Count, "other scales untouched")
				n, err = l.Reset(ctx, "u", 0)
				require.NoError(t, err)
				assert.Equal(t, 1, n)
				bs, err = l.Buckets(ctx, "u")
				require.NoError(t, err)
				assert.Empty(t, bs)
				_, err = l.Buckets(ctx, "")
				require.ErrorIs(t, err, rl.ErrInvalid)
				_, err = l.Reset(ctx, "u", -1)
				require.ErrorIs(t, err, rl.ErrInvalid, "a negative scale")
				_, err = l.Reset(ctx, "", 0)
				require.ErrorIs(t, err, rl.ErrInvalid, "an empty id")
			}},
		}})
	}
	cs = append(cs, tcase{Name: "algorithms never share counters", Start: t0, Steps: []step{
		{Do: func(t *testing.T, l rl.Limiter) {
			for _, a := range check.Algos {
				d, err := l.CheckRate(context.Background(), rl.Request{ID: "u", Scale: time.Second, Limit: 5, Hits: 2, Algo: a})
				require.NoError(t, err)
				assert.Equal(t, int64(2), d.Count, "%v", a)
			}
		}},
	}})
	return cs
}

// allowAny is the decision of a first hit on a fresh id, any algorithm.
func allowAny(a rl.Algo, r rl.Request) rl.Decision {
	scale := r.Scale.Milliseconds()
	d := rl.Decision{Allowed: true, Count: r.Hits, Limit: r.Limit, Remaining: r.Limit - r.Hits, Reset: millis.Duration(scale - t0%scale)}
	switch a {
	case rl.Token, rl.Leaky:
		// The bucket refills (the queue drains) r.Hits, each scale/limit ms.
		d.Reset = millis.Duration((r.Hits*scale + r.Limit - 1) / r.Limit)
	case rl.Slices:
		// The slice of 17 ms holding t0 leaves 60 slices after its start.
		d.Reset = millis.Duration(60*17 - t0%17)
	}
	return d
}

func delays(ds []rl.Decision) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.Delay.Milliseconds()
	}
	return out
}

func counts(ds []rl.Decision) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.Count
	}
	return out
}

// admin is a Limiter with the admin calls, as every backend is.
type admin interface {
	rl.Limiter
	Buckets(ctx context.Context, id string) ([]rl.Bucket, error)
	Reset(ctx context.Context, id string, scale time.Duration) (int, error)
}
