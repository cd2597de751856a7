package algo

import (
	"encoding/binary"
	"errors"

	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// Log is the sliding window log of one id and scale: every allowed hit of
// the last scale milliseconds with the millisecond it was allowed at, oldest
// first. A check is allowed iff the hits stamped within (now-scale, now]
// plus its own hits stay within the limit; it is exact, with no boundary
// burst and no estimate. Only allowed hits are remembered.
//
// The log is compact: hits of the same millisecond share one entry, and each
// entry is two unsigned varints in a byte ring (the time since the entry
// before and the hits), so an entry takes 2 bytes while hits come less than
// 128 ms apart and no more than 127 at once, at most 3+3 bytes for limits up
// to check.MaxLogLimit. The newest entry is kept apart, unencoded, so hits of
// the same millisecond add to it in place.
//
// The zero Log is empty. A Log is not safe for concurrent use: its owner
// (the store's actor) serialises the checks.
type Log struct {
	// enc holds the encoded entries from head on, oldest first; the newest
	// entry is lastT/lastC, not in enc.
	enc  []byte
	head int
	// first is the time of the entry at head (the oldest in enc), encT the
	// time of the newest in enc; the delta stored with the entry at head is
	// stale and never read.
	first, encT int64
	// encHits is the hits of the entries in enc.
	encHits uint64
	// lastT and lastC are the newest entry; lastC == 0 means the log is
	// empty (and then so is enc).
	lastT int64
	lastC uint64
}

// Hits returns the hits the log holds, expired ones included until the
// next check or Trim drops them.
func (l *Log) Hits() uint64 { return l.encHits + l.lastC }

// Newest returns the time of the newest entry, and false when the log is
// empty.
func (l *Log) Newest() (int64, bool) { return l.lastT, l.lastC > 0 }

// Oldest returns the time of the oldest entry, and false when the log is
// empty.
func (l *Log) Oldest() (int64, bool) {
	if l.lastC == 0 {
		return 0, false
	}
	if l.head < len(l.enc) {
		return l.first, true
	}
	return l.lastT, true
}

// Bytes returns the memory the log holds beyond its own struct: its ring's
// capacity.
func (l *Log) Bytes() int { return cap(l.enc) }

// Trim drops the entries that have left the window (now-scale, now].
func (l *Log) Trim(scale, now int64) {
	edge := now - scale // entries at or before edge are out
	if l.lastC == 0 {
		return
	}
	if l.lastT <= edge {
		*l = Log{enc: l.enc[:0]}
		return
	}
	for l.head < len(l.enc) && l.first <= edge {
		_, n := binary.Uvarint(l.enc[l.head:]) // stale delta
		c, m := binary.Uvarint(l.enc[l.head+n:])
		l.head += n + m
		l.encHits -= c
		if l.head < len(l.enc) {
			d, _ := binary.Uvarint(l.enc[l.head:])
			l.first += int64(d)
		}
	}
	if l.head == len(l.enc) {
		l.enc, l.head, l.encHits = l.enc[:0], 0, 0
	} else if l.head >= 64 && l.head > len(l.enc)/2 {
		n := copy(l.enc, l.enc[l.head:])
		l.enc, l.head = l.enc[:n], 0
	}
}

// add remembers hits allowed at now, which is not before the newest entry.
func (l *Log) add(now int64, hits uint64) {
	switch {
	case l.lastC == 0:
		l.lastT, l.lastC = now, hits
		return
	case now == l.lastT:
		l.lastC += hits
		return
	}
	// The newest entry moves into the ring.
	var d uint64
	if l.head < len(l.enc) {
		d = uint64(l.lastT - l.encT)
	} else {
		l.first = l.lastT
	}
	l.enc = binary.AppendUvarint(l.enc, d)
	l.enc = binary.AppendUvarint(l.enc, l.lastC)
	l.encT = l.lastT
	l.encHits += l.lastC
	l.lastT, l.lastC = now, hits
}

// timeToFree returns the time at which the oldest entries holding at least
// need hits have all left a window of scale: the time of the entry where
// the running sum of hits, oldest first, reaches need, plus scale. need
// must be at least 1 and at most Hits().
func (l *Log) timeToFree(need uint64, scale int64) int64 {
	t := l.first
	var sum uint64
	for i := l.head; i < len(l.enc); {
		d, n := binary.Uvarint(l.enc[i:])
		c, m := binary.Uvarint(l.enc[i+n:])
		if i != l.head {
			t += int64(d)
		}
		i += n + m
		if sum += c; sum >= need {
			return t + scale
		}
	}
	return l.lastT + scale
}

// LogCheck decides r (whose Algo is rl.Log) on l at now and updates l: the
// entries that left the window are dropped, and allowed hits are
// remembered. A now earlier than the newest entry (a clock that stepped
// back) is taken as that entry's time, so the log never rewinds.
//
// The decision reports Count, the hits in the window after the decision;
// Remaining = max(0, limit-Count); ResetMS, the time until the oldest hit
// in the window leaves it (0 when the log is empty); and when denied
// RetryAfterMS, the time until enough hits have left for r.Hits to fit
// (waiting exactly that long passes, 1 ms less fails). Hits above the limit
// never pass: RetryAfterMS is then max(ResetMS, 1).
func LogCheck(l *Log, now int64, r millis.Request) millis.Decision {
	if l.lastC > 0 && now < l.lastT {
		now = l.lastT
	}
	l.Trim(r.Scale, now)
	lim, h := uint64(max(r.Limit, 0)), uint64(max(r.Hits, 0))
	total := l.Hits()
	allowed := total+h <= lim
	if allowed && h > 0 {
		l.add(now, h)
		total += h
	}
	d := millis.Decision{Allowed: allowed, Count: int64(total), Limit: r.Limit, Now: now}
	if total < lim {
		d.Remaining = int64(lim - total)
	}
	if oldest, ok := l.Oldest(); ok {
		d.ResetMS = oldest + r.Scale - now
	}
	if !allowed {
		if h > lim {
			d.RetryAfterMS = max(d.ResetMS, 1)
		} else {
			d.RetryAfterMS = max(l.timeToFree(total+h-lim, r.Scale)-now, 1)
		}
	}
	return d
}

// logVersion is the first byte of a marshalled Log.
const logVersion = 1

// ErrLogCorrupt is returned by UnmarshalBinary for bytes that are not a
// marshalled Log.
var ErrLogCorrupt = errors.New("algo: corrupt log")

// AppendBinary appends the log's compact form to b: a version byte, the
// newest entry's time and hits, the oldest encoded entry's time, then the
// encoded entries (all varints). Expired entries are kept: Trim first to
// drop them.
func (l *Log) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, logVersion)
	b = binary.AppendVarint(b, l.lastT)
	b = binary.AppendUvarint(b, l.lastC)
	b = binary.AppendVarint(b, l.first)
	b = binary.AppendUvarint(b, uint64(len(l.enc)-l.head))
	return append(b, l.enc[l.head:]...), nil
}

// UnmarshalBinary reads what AppendBinary wrote, checking that the entries
// decode, that their times rise, and that no count is zero.
func (l *Log) UnmarshalBinary(b []byte) error {
	if len(b) == 0 || b[0] != logVersion {
		return ErrLogCorrupt
	}
	b = b[1:]
	var nl Log
	var ok bool
	if nl.lastT, b, ok = varint(b); !ok {
		return ErrLogCorrupt
	}
	if nl.lastC, b, ok = uvarint(b); !ok {
		return ErrLogCorrupt
	}
	if nl.first, b, ok = varint(b); !ok {
		return ErrLogCorrupt
	}
	var n uint64
	if n, b, ok = uvarint(b); !ok || n != uint64(len(b)) {
		return ErrLogCorrupt
	}
	if nl.lastC == 0 && n > 0 {
		return ErrLogCorrupt
	}
	entries, rest := b, b
	t := nl.first
	for i := 0; len(rest) > 0; i++ {
		var d, c uint64
		if d, rest, ok = uvarint(rest); !ok {
			return ErrLogCorrupt
		}
		if c, rest, ok = uvarint(rest); !ok || c == 0 {
			return ErrLogCorrupt
		}
		if i > 0 {
			if d == 0 || d > 1<<62 {
				return ErrLogCorrupt
			}
			t += int64(d)
		}
		nl.encHits += c
		nl.encT = t
		if nl.encHits > 1<<40 {
			return ErrLogCorrupt
		}
	}
	if n > 0 && t >= nl.lastT {
		return ErrLogCorrupt
	}
	nl.enc = append(l.enc[:0], entries...) // l's ring, reused
	*l = nl
	return nil
}

func varint(b []byte) (int64, []byte, bool) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, b, false
	}
	return v, b[n:], true
}

func uvarint(b []byte) (uint64, []byte, bool) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, b, false
	}
	return v, b[n:], true
}
