package buckets

import (
	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// logSlab holds the sliding window logs of the store's Log records. A Log
// record's count is its log's index here, so records stay plain words that
// the garbage collector need not scan; freed indices are reused.
type logSlab struct {
	logs []algo.Log
	free []int64
	// ringBytes is the capacity of every log's ring, added up.
	ringBytes int
}

// logUnit is the size of a record in the bound on records: a log's ring
// counts as one more record for every logUnit bytes it holds.
const logUnit = 64

func (s *logSlab) alloc(l algo.Log) int64 {
	s.ringBytes += l.Bytes()
	if n := len(s.free); n > 0 {
		i := s.free[n-1]
		s.free = s.free[:n-1]
		s.logs[i] = l
		return i
	}
	s.logs = append(s.logs, l)
	return int64(len(s.logs) - 1)
}

func (s *logSlab) release(i int64) {
	s.ringBytes -= s.logs[i].Bytes()
	s.logs[i] = algo.Log{}
	s.free = append(s.free, i)
}

// load is the store's size for its bound: records, and the logs' rings in
// units of logUnit bytes.
func (s *Store) load() int { return s.tree.Len() + s.logs.ringBytes/logUnit }

// checkLog decides a request with algo Log: the id's single record for the
// scale points to its log in the slab. A record is made only when a hit is
// remembered; a denied check or a peek on an absent log stores nothing.
func (s *Store) checkLog(now int64, r millis.Request) (millis.Decision, error) {
	p, ok := s.get(r.ID, r.Scale, rl.Log, 0)
	if ok {
		l := &s.logs.logs[p.count]
		before := l.Bytes()
		d := algo.LogCheck(l, now, r)
		s.logs.ringBytes += l.Bytes() - before
		if t, ok := l.Newest(); ok {
			p.modified = max(p.modified, t)
		}
		if r.Hits > 0 {
			p.setDenying(!d.Allowed)
			if !d.Allowed {
				// Denied: nothing is remembered, but the id is busy (see
				// Check: eviction must not take it for an idle one). The
				// record then expires later than its newest hit, never
				// earlier.
				p.modified = max(p.modified, d.Now)
			}
		}
		if l.Bytes() > before {
			s.trim(now, p) // the log grew in place
		}
		return d, nil
	}
	var l algo.Log
	d := algo.LogCheck(&l, now, r)
	if l.Hits() == 0 {
		return d, nil
	}
	if s.overScales(r.ID, r.Scale, 0) {
		return millis.Decision{}, ErrTooManyScales
	}
	old := s.makeRoom(now, len(r.ID))
	p = newRec(old, r.ID, r.Scale, rl.Log, algo.Record{Count: s.logs.alloc(l), Created: d.Now, Modified: d.Now})
	s.insert(r.ID, p)
	s.trim(now, p) // its ring
	return d, nil
}

// AppendLog appends the marshalled log (algo.Log.AppendBinary) of id's Log
// record of scale to dst, and reports whether there is one. It is for
// saving a snapshot; Scan shows a Log record's count only.
func (s *Store) AppendLog(dst []byte, id string, scale int64) ([]byte, bool) {
	// A pivot of its own: AppendLog may run inside a Scan, which holds
	// the store's.
	var pv pivot
	p, ok := s.tree.Get(pv.set(id, scale, rl.Log, 0))
	if !ok {
		return dst, false
	}
	dst, _ = s.logs.logs[p.count].AppendBinary(dst)
	return dst, true
}

// PutLog stores a Log record of id and scale created at created, holding
// the marshalled log data (as AppendLog wrote it), replacing the record with
// the same key and evicting one as Check does when the store is full. It is
// for restoring a snapshot.
func (s *Store) PutLog(id string, scale, created int64, data []byte) error {
	req := millis.Request{ID: id, Scale: scale, Algo: rl.Log}
	if err := req.Validate(s.maxID); err != nil {
		return err
	}
	var l algo.Log
	if err := l.UnmarshalBinary(data); err != nil {
		return &rl.FieldError{Field: "log", Rule: "entries do not decode: " + err.Error()}
	}
	newest, ok := l.Newest()
	if !ok {
		return nil // an empty log is no record
	}
	if p, found := s.tree.Get(s.pv.set(id, scale, rl.Log, 0)); found {
		s.tree.Delete(p)
		s.remove(p)
	}
	p := newRec(s.makeRoom(newest, len(id)), id, scale, rl.Log,
		algo.Record{Count: s.logs.alloc(l), Created: created, Modified: newest})
	s.insert(id, p)
	s.trim(newest, p) // its ring
	return nil
}
