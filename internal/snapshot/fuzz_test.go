package snapshot_test

import (
	"bytes"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/memstore"
	"testing"

	"github.com/raterlimiter/raterlimiter/internal/snapshot"
)

// FuzzRead: any bytes are read without a panic; what is accepted is made of
// records in range, as many as the file says. The seed corpus in
// testdata/fuzz/FuzzRead holds a valid snapshot and the corruption cases.
func FuzzRead(f *testing.F) {
	f.Add(goodSnapshot(f))
	f.Fuzz(func(t *testing.T, data []byte) {
		n := 0
		info, err := snapshot.Read(bytes.NewReader(data), int64(len(data)), func(r snapshot.Record) error {
			n++
			if r.ID == "" || len(r.ID) > memstore.MaxIDBytes || r.Scale < 1 || r.Scale > 315360000000 || !check.ValidAlgo(r.Algo) {
				t.Fatalf("record out of range accepted: %d-byte id, scale %d, algo %d", len(r.ID), r.Scale, r.Algo)
			}
			return nil
		})
		if err != nil {
			return
		}
		if info.Records != n {
			t.Fatalf("info says %d records, fn saw %d", info.Records, n)
		}
	})
}
