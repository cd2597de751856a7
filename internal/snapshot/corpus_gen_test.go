package snapshot_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWriteFuzzCorpus regenerates testdata/fuzz/FuzzRead when
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
		"good":              good,
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
	dir := filepath.Join("testdata", "fuzz", "FuzzRead")
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
