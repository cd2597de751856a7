// Package buckets is raterlimiter's store: an ordered B-tree
// (github.com/tidwall/btree) of records keyed by (id, scale, algo, bucket),
// each holding a count and the times it was created and last modified (the
// sliding window counters' by (id, scale, algo, slice count, slot): a ring
// of slices, see slices.go).
//
// All the records of one id sit next to each other, and within them those of
// one scale, so the sliding window finds the previous bucket as a neighbour and
// the admin API lists or deletes an id with one range walk.
//
// A Store is not safe for concurrent use: one goroutine (an actor) owns it.
// No method reads a clock; every one that depends on time takes now, in Unix
// milliseconds.
//
// Each record is one pointer-free allocation holding a 32-byte header and the
// id's bytes, so the garbage collector never scans the records and a record
// with a 16-byte id takes 48 bytes. The bucket number is not stored: the
// record is created inside its window, so the number is created/scale.
//
// Engine internals: use package memory. Only memory imports this package
// (the root package's TestEngineIsSealed checks it).
package buckets
