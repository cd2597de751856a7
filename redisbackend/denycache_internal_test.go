package redisbackend

import (
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// TestDenyCacheIsBounded: however many ids are denied, the cache holds no
// more than its size (rounded to its shards), evicting at random.
func TestDenyCacheIsBounded(t *testing.T) {
	c := newDenyCache(1024)
	for i := range 100_000 {
		r := millis.Request{ID: "id" + strconv.Itoa(i), Scale: 1000, Limit: 1, Hits: 1, Algo: rl.Token}
		c.remember(r, millis.Decision{Allowed: false, Now: 5, RetryAfterMS: 100}, state{ok: true, rec: algo.Record{Modified: 2000}}, 5)
	}
	n := 0
	for i := range c.shards {
		n += len(c.shards[i].m)
	}
	assert.LessOrEqual(t, n, 1024)
	assert.Greater(t, n, 512, "and is used")
	assert.Equal(t, int64(n), c.ids.Load(), "the count of ids, which spares checks the lock when 0")
}

// TestDenyCacheForgetsAndLets: a denial is answered from the state while
// the state denies, dropped once its window has passed, forgotten by a
// Reset, and replaced by Redis's next answer; peeks pass to Redis unless
// a fixed window is over its limit.
func TestDenyCacheForgetsAndLets(t *testing.T) {
	c := newDenyCache(64)
	const t0 = 1_700_000_040_000
	r := millis.Request{ID: "u", Scale: 1000, Limit: 2, Hits: 1}
	// Redis counted the third hit of a window of two.
	d, _, _ := algo.Fixed(algo.Record{Count: 2}, true, t0, r)
	require.False(t, d.Allowed)
	st := state{w: algo.Bucket(t0, r.Scale), cur: d.Count}
	c.remember(r, d, st, t0)

	ds := make([]millis.Decision, 1)
	todo, _ := c.answer([]millis.Request{r}, t0+10, ds)
	assert.Empty(t, todo, "denied here")
	assert.Equal(t, int64(4), ds[0].Count, "every hit counts")
	peek := r
	peek.Hits, peek.Peek = 0, true
	todo, _ = c.answer([]millis.Request{peek}, t0+10, ds)
	assert.Empty(t, todo, "a fixed window over its limit answers peeks too")
	assert.Equal(t, int64(4), ds[0].Count)

	bigger := r
	bigger.Limit = 100
	todo, pending := c.answer([]millis.Request{bigger}, t0+10, ds)
	assert.Equal(t, []int{0}, todo, "a limit the state allows goes to Redis")
	assert.Equal(t, []int64{1}, pending, "with the hit counted here")

	c.remember(r, d, st, t0)
	todo, _ = c.answer([]millis.Request{r}, t0+1000, ds)
	assert.Equal(t, []int{0}, todo, "the window has passed")

	c.remember(r, d, st, t0)
	c.forget("u")
	todo, _ = c.answer([]millis.Request{r}, t0+10, ds)
	assert.Equal(t, []int{0}, todo, "Reset forgets")

	c.remember(r, d, st, t0)
	c.remember(r, millis.Decision{Allowed: true, Now: t0 + 20}, state{}, t0+20)
	todo, _ = c.answer([]millis.Request{r}, t0+30, ds)
	assert.Equal(t, []int{0}, todo, "an allowed answer from Redis drops the state")

	assert.Zero(t, c.ids.Load(), "nothing left")

	var nilCache *denyCache
	todo, _ = nilCache.answer([]millis.Request{r}, t0, ds)
	assert.Equal(t, []int{0}, todo, "off")
}

// TestDenyCacheSlicesAndLeaky: a slices denial is decided from its slices
// with algo.SlicesCheck until the slices have left the window, each slice
// count on its own; a leaky denial from its TAT with algo.Leaky, until the
// queue has room. Both answer what the pure functions answer, offset by
// Redis's lead.
func TestDenyCacheSlicesAndLeaky(t *testing.T) {
	c := newDenyCache(64)
	const t0 = 1_700_000_040_000
	ds := make([]millis.Decision, 1)

	// Six slices of 10 s: 4 hits at t0, the limit.
	r6 := millis.Request{ID: "u", Scale: 60_000, Limit: 4, Hits: 1, Algo: rl.Slices, Slices: 6}
	_, _, k := algo.SliceOf(t0, r6)
	list := []algo.Slice{{Num: k, Hits: 4}}
	d := algo.SlicesCheck(list, t0, r6)
	require.False(t, d.Allowed)
	st := state{}
	st.w, st.slices = packSlices(list)
	c.remember(r6, d, st, t0-5) // Redis 5 ms ahead
	// The same id and scale with 60 slices is another record.
	r60 := r6
	r60.Slices = 60
	_, _, k60 := algo.SliceOf(t0, r60)
	list60 := []algo.Slice{{Num: k60, Hits: 4}}
	d60 := algo.SlicesCheck(list60, t0, r60)
	st.w, st.slices = packSlices(list60)
	c.remember(r60, d60, st, t0)
	for _, tc := range []struct {
		name string
		r    millis.Request
		list []algo.Slice
		lead int64
	}{{"6 slices", r6, list, 5}, {"60 slices", r60, list60, 0}} {
		at := int64(t0 + 1000)
		todo, _ := c.answer([]millis.Request{tc.r}, at, ds)
		require.Empty(t, todo, tc.name)
		assert.Equal(t, algo.SlicesCheck(tc.list, at+tc.lead, tc.r), ds[0], tc.name)
	}
	// Once slice k has left the window (at (k+6)*w, Redis's time), Redis
	// decides again.
	n, w, _ := algo.SliceOf(t0, r6)
	todo, _ := c.answer([]millis.Request{r6}, (k+n)*w-5, ds)
	assert.Equal(t, []int{0}, todo, "the slices have left")

	// A window of many slices with hits, packed and read back as they
	// were; past maxCachedSlices, not kept: Redis answers.
	r600 := r60
	r600.Slices, r600.ID, r600.Limit = 600, "m", maxCachedSlices
	_, _, k600 := algo.SliceOf(t0, r600)
	var many []algo.Slice
	for i := range int64(maxCachedSlices + 1) {
		many = append(many, algo.Slice{Num: k600 - 3*i, Hits: 1 + i%3})
	}
	slices.Reverse(many)
	newest, packed := packSlices(many[1:])
	require.Len(t, packed, maxCachedSlices)
	assert.Equal(t, many[1:], unpackSlices(nil, newest, packed))
	_, packed = packSlices(many)
	assert.Nil(t, packed, "too many to keep")
	d600 := algo.SlicesCheck(many, t0, r600)
	require.False(t, d600.Allowed)
	st.w, st.slices = packSlices(many)
	c.remember(r600, d600, st, t0)
	todo, _ = c.answer([]millis.Request{r600}, t0, ds)
	assert.Equal(t, []int{0}, todo, "not cached")

	// A leaky bucket of 5 a second and no queue: a hit each 200 ms.
	q := millis.Request{ID: "q", Scale: 1000, Limit: 5, Hits: 1, Algo: rl.Leaky}
	tat := algo.Record{Count: 5 << 32, Modified: t0 + 200}
	d, _, _ = algo.Leaky(tat, true, t0, q)
	require.False(t, d.Allowed)
	c.remember(q, d, state{rec: tat, ok: true}, t0)
	todo, _ = c.answer([]millis.Request{q}, t0+199, ds)
	require.Empty(t, todo)
	want, _, _ := algo.Leaky(tat, true, t0+199, q)
	assert.Equal(t, want, ds[0])
	todo, _ = c.answer([]millis.Request{q}, t0+200, ds)
	assert.Equal(t, []int{0}, todo, "the queue has room: Redis decides")
}
