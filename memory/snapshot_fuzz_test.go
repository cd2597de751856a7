package memory

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// FuzzReadSnapshot: any bytes are read without a panic; a failure is
// ErrCorruptSnapshot; what is accepted is made of records in range, as many
// as the trailer says. The seed corpus in testdata/fuzz/FuzzReadSnapshot
// holds valid snapshots (versions 1 and 3) and the corruption cases.
func FuzzReadSnapshot(f *testing.F) {
	f.Add(goodSnapshot(f))
	fixture, err := os.ReadFile("testdata/v3.snap")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(fixture)
	f.Fuzz(func(t *testing.T, data []byte) {
		n := 0
		info, err := readSnapshot(bytes.NewReader(data), int64(len(data)), func(r record) error {
			n++
			if r.ID == "" || len(r.ID) > snapshotMaxID || r.Scale < 1 || r.Scale > millis.MaxScale || !check.ValidAlgo(r.Algo) {
				t.Fatalf("record out of range accepted: %d-byte id, scale %d, algo %d", len(r.ID), r.Scale, r.Algo)
			}
			return nil
		})
		if err != nil {
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("an error that is not ErrCorruptSnapshot: %v", err)
			}
			return
		}
		if info.records != n {
			t.Fatalf("info says %d records, fn saw %d", info.records, n)
		}
	})
}

// TestWriteFuzzCorpus regenerates testdata/fuzz/FuzzReadSnapshot when
// SNAPSHOT_WRITE_CORPUS=1.
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("SNAPSHOT_WRITE_CORPUS") != "1" {
		t.Skip("set SNAPSHOT_WRITE_CORPUS=1 to regenerate the seed corpus")
	}
	good := goodSnapshot(t)
	mutate := func(f func(b []byte) []byte) []byte { return f(slices.Clone(good)) }
	hostile := []byte("RLSNAP\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00")
	hostile = binary.AppendUvarint(hostile, 0)
	hostile = binary.AppendUvarint(hostile, 1<<40)
	hostile = withCRC(append(hostile, 'a', 0, 0, 0, 0))
	seeds := map[string][]byte{
		"good_v3":           good,
		"empty":             {},
		"wrong_magic":       mutate(func(b []byte) []byte { b[0] = 'X'; return b }),
		"wrong_version":     withCRC(mutate(func(b []byte) []byte { b[7] = 4; return b })),
		"flipped_byte":      mutate(func(b []byte) []byte { b[20] ^= 0x10; return b }),
		"truncated":         good[:len(good)/2],
		"trailing":          withCRC(append(slices.Clone(good[:len(good)-4]), 0, 0, 0, 0, 0)),
		"bad_count":         withCRC(mutate(func(b []byte) []byte { b[len(b)-5]++; return b })),
		"bad_shared_prefix": withCRC(mutate(func(b []byte) []byte { b[16] = 9; return b })),
		"huge_id_length":    hostile,
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzReadSnapshot")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range seeds {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
