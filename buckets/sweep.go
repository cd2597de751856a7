package buckets

import (
	"github.com/tidwall/btree"

	"github.com/raterlimiter/raterlimiter/internal/algo"
)

// Sweep examines at most budget records, starting where the previous call
// stopped, and deletes those no decision at now or later can read (see
// algo.Expired). It returns how many it examined and deleted, and done when
// it has reached the end of the tree; the next call then starts a new pass.
// A budget of 0 or less sweeps the whole tree at once.
//
// Checks may run between calls: a record created behind the cursor waits for
// the next pass, which is harmless since a new record is not expired.
func (s *Store) Sweep(now int64, budget int) (examined, deleted int, done bool) {
	from := s.sweepNext
	s.sweepNext = nil
	iter := func(p *rec) btree.Action {
		if budget > 0 && examined == budget {
			s.sweepNext = p
			return btree.Stop
		}
		examined++
		if algo.Expired(p.algo(), p.scale(), p.record(), now) {
			deleted++
			s.remove(p)
			return btree.Delete
		}
		return btree.Keep
	}
	if from == nil {
		from, _ = s.tree.Min() // nil when the tree is empty
	}
	if from != nil {
		s.tree.DeleteAscend(from, iter)
	}
	return examined, deleted, s.sweepNext == nil
}
