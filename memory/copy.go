package memory

import (
	"context"
	"fmt"
	"strings"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/buckets"
	"github.com/raterlimiter/raterlimiter/internal/algo"
)

// record is one record of a store, as copyRecords hands it out and a
// snapshot holds it.
type record struct {
	ID    string
	Scale int64 // the window, in milliseconds
	Algo  rl.Algo
	State algo.Record
	// Log is, for a Log record, its entries as algo.Log.AppendBinary
	// writes them; nil otherwise.
	Log []byte
}

// copyRecords hands fn every record of the limiter that has not expired,
// shard by shard, each shard's in the store's order (id, scale, algorithm,
// bucket). It visits a shard's goroutine for at most chunk records at a
// time, so checks on that shard wait for one visit only, and resumes after
// the last record it copied: a record added or removed between visits is
// never handed out twice, and one that stays is never missed. fn runs on
// the shard's goroutine, so it must be quick and must not call the
// limiter; after each visit, endVisit (on the caller's goroutine) gets the
// visit's duration, and an error from it stops the copy.
func (l *Limiter) copyRecords(ctx context.Context, chunk int, fn func(record) error, endVisit func(took time.Duration) error) error {
	if chunk <= 0 {
		return fmt.Errorf("memory: copyRecords: chunk must be positive, not %d", chunk)
	}
	for i, a := range l.actors {
		var c cursor
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			var (
				done bool
				verr error
				took time.Duration
			)
			err := a.Do(ctx, func(s *buckets.Store, now int64) {
				t0 := time.Now()
				done, verr = c.visit(s, now, chunk, fn)
				took = time.Since(t0)
			})
			if err == nil {
				err = verr
			}
			if err == nil {
				err = endVisit(took)
			}
			if err != nil {
				return fmt.Errorf("shard %d: %w", i, err)
			}
			if done {
				break
			}
		}
	}
	return nil
}

// key is a record's place in a store, where buckets.Store.ScanFrom resumes.
type key struct {
	id     string
	scale  int64
	algo   rl.Algo
	slices int64 // a Slices record's slice count, else 0
	b      int64
}

func keyOf(id string, scale int64, a rl.Algo, r algo.Record) key {
	k := key{id: id, scale: scale, algo: a, b: algo.BucketOf(a, scale, r)}
	if a == rl.Slices {
		// The store keeps a limit's slices in a ring: ordered by slot.
		k.slices, _ = algo.SlicesOfRecord(r)
		k.b = buckets.SliceSlot(k.b, k.slices)
	}
	return k
}

// cursor is where a chunked copy of one store stands: each visit resumes
// after the last record the previous one copied (buckets.Store.ScanFrom),
// so a visit costs its own chunk only.
type cursor struct {
	last    key // the last record copied
	started bool
	logBuf  []byte
}

// visit hands fn at most chunk records after the cursor, leaving out
// expired ones, and reports done when it reached the end of the store.
func (c *cursor) visit(s *buckets.Store, now int64, chunk int, fn func(record) error) (done bool, err error) {
	n := 0
	var prev key
	done = true
	each := func(id string, scale int64, al rl.Algo, r algo.Record) bool {
		k := keyOf(id, scale, al, r)
		if c.started && k == c.last {
			return true // the record the previous visit ended on
		}
		if n == chunk {
			done = false
			return false
		}
		if !algo.Expired(al, scale, r, now) {
			rec := record{ID: id, Scale: scale, Algo: al, State: r}
			if al == rl.Log {
				// A log's hits are not in its record: its entries follow.
				c.logBuf, _ = s.AppendLog(c.logBuf[:0], id, scale)
				rec.Log = c.logBuf
			}
			if err = fn(rec); err != nil {
				return false
			}
		}
		prev = k
		n++
		return true
	}
	if c.started {
		s.ScanFrom(c.last.id, c.last.scale, c.last.algo, c.last.slices, c.last.b, each)
	} else {
		s.Scan(each)
	}
	if n > 0 {
		// The id is the store's memory: copy it out.
		c.last, c.started = prev, true
		c.last.id = strings.Clone(prev.id)
	}
	return done, err
}
