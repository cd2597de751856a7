package snapshot

import (
	"bytes"
	"encoding/binary"
	"github.com/raterlimiter/raterlimiter/internal/bounds"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/algo"
	"github.com/raterlimiter/raterlimiter/internal/ms"
)

const written = int64(1_700_000_040_000)

// craft writes a snapshot of the given records as a foreign writer that
// knows the format would: every checksum right.
func craft(recs ...Record) []byte {
	e := &encoder{base: written}
	b := appendHeader(nil, written)
	for _, r := range recs {
		var logData []byte
		e.add(r.ID, r.Scale, r.Algo, r.State, logData)
	}
	e.end()
	b = append(b, e.buf...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func TestRecordsValidatedByMeaning(t *testing.T) {
	ok := Record{ID: "u", Scale: 60_000, Algo: rl.Fixed, State: algo.Record{Count: 5, Created: written - 1000, Modified: written - 10}}
	with := func(f func(r *Record)) Record { r := ok; f(&r); return r }
	for _, tc := range []struct {
		name string
		recs []Record
		msg  string
	}{
		{"a plausible record", []Record{ok}, ""},
		{"a count of -1,000,000", []Record{with(func(r *Record) { r.State.Count = -1_000_000 })}, "negative count"},
		{"a sliding count above any limit", []Record{with(func(r *Record) { r.Algo = rl.Sliding; r.State.Count = bounds.MaxLimit + 1 })}, "above any limit"},
		{"a record five windows in the future", []Record{with(func(r *Record) {
			r.Scale = 3_600_000
			r.State.Created, r.State.Modified = written+5*3_600_000, written+5*3_600_000
		})}, "after the file was written"},
		{"changed before created", []Record{with(func(r *Record) { r.State.Modified = r.State.Created - 1 })}, "before it was created"},
		{"a token TAT ten years ahead", []Record{with(func(r *Record) {
			r.Algo = rl.Token
			r.State.Count = 0
			r.State.Modified = written + ms.MaxScale
		})}, "theoretical arrival time"},
		{"a plausible token bucket", []Record{with(func(r *Record) {
			r.Algo = rl.Token
			r.State.Count = int64(uint64(10)<<32 | 3)
			r.State.Modified = written + 30_000
		})}, ""},
		{"a token fraction at its denominator", []Record{with(func(r *Record) {
			r.Algo = rl.Token
			r.State.Count = int64(uint64(10)<<32 | 10)
		})}, "token fraction"},
		{"the same key twice", []Record{ok, ok}, "the same key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := craft(tc.recs...)
			_, err := Read(bytes.NewReader(data), int64(len(data)), nil)
			if tc.msg == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}
