package algo

import (
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// Fixed is raterlimiter's fixed window: the hits are added to the current
// window's counter whether or not they are allowed (as the Erlang original), and
// allowed iff the counter stays within the limit. Hits=0 peeks and writes
// nothing; a limit of 0 denies every hit.
func Fixed(cur Record, ok bool, now int64, r millis.Request) (millis.Decision, Record, bool) {
	if !ok {
		cur = Record{Created: now}
	}
	end := (Bucket(now, r.Scale) + 1) * r.Scale
	write := r.Hits > 0
	if write {
		cur.Count = satAdd(cur.Count, r.Hits)
		cur.Modified = now
	}
	d := millis.Decision{
		Allowed: cur.Count <= r.Limit,
		Count:   cur.Count,
		Limit:   r.Limit,
		ResetMS: end - now,
		Now:     now,
	}
	if cur.Count < r.Limit {
		d.Remaining = r.Limit - cur.Count
	}
	if !d.Allowed {
		// The next window starts empty: the same request passes then, unless
		// it asks for more than the limit, which no wait mends.
		d.RetryAfterMS = d.ResetMS
	}
	return d, cur, write
}
