package redisbackend

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/algo"
)

// TestDenyCacheIsBounded: however many ids are denied, the cache holds no
// more than its size (rounded to its shards), evicting at random.
func TestDenyCacheIsBounded(t *testing.T) {
	c := newDenyCache(1024)
	for i := range 100_000 {
		r := rl.Request{ID: "id" + strconv.Itoa(i), Scale: 1000, Limit: 1, Hits: 1, Algo: rl.Token}
		c.remember(r, rl.Decision{Allowed: false, Now: 5, RetryAfterMS: 100}, state{ok: true, rec: algo.Record{Modified: 2000}}, 5)
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
	r := rl.Request{ID: "u", Scale: 1000, Limit: 2, Hits: 1}
	// Redis counted the third hit of a window of two.
	d, _, _ := algo.Fixed(algo.Record{Count: 2}, true, t0, r)
	require.False(t, d.Allowed)
	st := state{w: algo.Bucket(t0, r.Scale), cur: d.Count}
	c.remember(r, d, st, t0)

	ds := make([]rl.Decision, 1)
	todo, _ := c.answer([]rl.Request{r}, t0+10, ds)
	assert.Empty(t, todo, "denied here")
	assert.Equal(t, int64(4), ds[0].Count, "every hit counts")
	peek := r
	peek.Hits = 0
	todo, _ = c.answer([]rl.Request{peek}, t0+10, ds)
	assert.Empty(t, todo, "a fixed window over its limit answers peeks too")
	assert.Equal(t, int64(4), ds[0].Count)

	bigger := r
	bigger.Limit = 100
	todo, pending := c.answer([]rl.Request{bigger}, t0+10, ds)
	assert.Equal(t, []int{0}, todo, "a limit the state allows goes to Redis")
	assert.Equal(t, []int64{1}, pending, "with the hit counted here")

	c.remember(r, d, st, t0)
	todo, _ = c.answer([]rl.Request{r}, t0+1000, ds)
	assert.Equal(t, []int{0}, todo, "the window has passed")

	c.remember(r, d, st, t0)
	c.forget("u")
	todo, _ = c.answer([]rl.Request{r}, t0+10, ds)
	assert.Equal(t, []int{0}, todo, "Reset forgets")

	c.remember(r, d, st, t0)
	c.remember(r, rl.Decision{Allowed: true, Now: t0 + 20}, state{}, t0+20)
	todo, _ = c.answer([]rl.Request{r}, t0+30, ds)
	assert.Equal(t, []int{0}, todo, "an allowed answer from Redis drops the state")

	assert.Zero(t, c.ids.Load(), "nothing left")

	var nilCache *denyCache
	todo, _ = nilCache.answer([]rl.Request{r}, t0, ds)
	assert.Equal(t, []int{0}, todo, "off")
}
