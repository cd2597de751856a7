package algo

import (
	"testing"

	"github.com/stretchr/testify/assert"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

func TestFixed(t *testing.T) {
	const t0 = 1_700_000_040_000
	r := func(limit, hits int64) millis.Request {
		return millis.Request{ID: "u", Scale: 1000, Limit: limit, Hits: hits}
	}
	tests := []struct {
		name      string
		cur       Record
		ok        bool
		now       int64
		r         millis.Request
		want      millis.Decision
		wantRec   Record
		wantWrite bool
	}{
		{"first hit creates the record", Record{}, false, t0 + 250, r(2, 1),
			millis.Decision{Allowed: true, Count: 1, Limit: 2, Remaining: 1, ResetMS: 750, Now: t0 + 250},
			Record{Count: 1, Created: t0 + 250, Modified: t0 + 250}, true},
		{"hit within the limit", Record{1, t0, t0}, true, t0 + 999, r(2, 1),
			millis.Decision{Allowed: true, Count: 2, Limit: 2, Remaining: 0, ResetMS: 1, Now: t0 + 999},
			Record{2, t0, t0 + 999}, true},
		{"denied hits count", Record{2, t0, t0}, true, t0 + 10, r(2, 1),
			millis.Decision{Count: 3, Limit: 2, ResetMS: 990, RetryAfterMS: 990, Now: t0 + 10},
			Record{3, t0, t0 + 10}, true},
		{"limit 0 denies the first hit", Record{}, false, t0, r(0, 1),
			millis.Decision{Count: 1, ResetMS: 1000, RetryAfterMS: 1000, Now: t0},
			Record{1, t0, t0}, true},
		{"peek writes nothing", Record{1, t0, t0}, true, t0 + 5, r(2, 0),
			millis.Decision{Allowed: true, Count: 1, Limit: 2, Remaining: 1, ResetMS: 995, Now: t0 + 5},
			Record{1, t0, t0}, false},
		{"peek of a fresh id", Record{}, false, t0, r(2, 0),
			millis.Decision{Allowed: true, Count: 0, Limit: 2, Remaining: 2, ResetMS: 1000, Now: t0},
			Record{0, t0, 0}, false},
		{"count saturates", Record{1<<63 - 2, t0, t0}, true, t0, r(check.MaxLimit, check.MaxHits),
			millis.Decision{Count: 1<<63 - 1, Limit: check.MaxLimit, ResetMS: 1000, RetryAfterMS: 1000, Now: t0},
			Record{1<<63 - 1, t0, t0}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, rec, write := Fixed(tt.cur, tt.ok, tt.now, tt.r)
			assert.Equal(t, tt.want, d)
			assert.Equal(t, tt.wantWrite, write)
			if write {
				assert.Equal(t, tt.wantRec, rec)
			}
		})
	}
}

func TestBucketFloorsNegativeTimes(t *testing.T) {
	assert.Equal(t, int64(-1), Bucket(-1, 1000))
	assert.Equal(t, int64(0), Bucket(0, 1000))
	assert.Equal(t, int64(0), Bucket(999, 1000))
	assert.Equal(t, int64(1), Bucket(1000, 1000))
}

func TestExpiredFixed(t *testing.T) {
	rec := Record{Count: 1, Created: 1500, Modified: 1600}
	assert.False(t, Expired(rl.Fixed, 1000, rec, 1999))
	assert.True(t, Expired(rl.Fixed, 1000, rec, 2000))
}
