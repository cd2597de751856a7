package main

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// The sidecar's files (the policies, the RLS configuration, the TLS pairs
// and CA bundles, the admin token) are read with internal/sidecar/readfile: regular
// files only, bounded in size while read. Loading one runs under
// fileTimeout, so that a read that hangs (a stale network mount, a FUSE
// daemon that stopped answering) fails the load as a file that does not
// load fails it, and holds no lock that SIGHUP, POST /reload or the next
// change need.

// fileTimeout bounds loading one of the sidecar's files: stating, opening,
// reading and parsing it. Such a file is at most a few MiB on a local
// disk, read in milliseconds.
const fileTimeout = 5 * time.Second

// maxHungLoads bounds the loads of one kind of file that were abandoned
// and have not returned yet: each holds a thread in a system call. Past
// it a load fails at once.
const maxHungLoads = 4

// maxPEMBytes bounds a PEM file: a certificate chain, its key, a CA
// bundle (the system's whole bundle is about 200 KiB).
const maxPEMBytes = 1 << 20

// maxTokenBytes bounds -admin-token-file.
const maxTokenBytes = 4 << 10

// errHung matches the error of a load abandoned after fileTimeout, or
// refused because maxHungLoads still hang.
var errHung = errors.New("the read hangs")

// fileLoads runs the loads of one kind of file. The zero value is ready;
// it is safe for concurrent use.
type fileLoads struct {
	hung atomic.Int32 // loads abandoned that have not returned
}

// loadFile runs load (reading what) and returns its result, or an error
// matching errHung after fileTimeout: load then goes on in the background
// and what it returns is dropped. The memory a load used is given back to
// the system once it returns: a reload is rare, and parsing takes many
// times the file's size.
func loadFile[T any](l *fileLoads, what string, load func() (T, error)) (T, error) {
	var zero T
	if n := l.hung.Load(); n >= maxHungLoads {
		return zero, fmt.Errorf("%s: not read: %d earlier reads have hung for more than %s and not returned: %w", what, n, fileTimeout, errHung)
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := load()
		done <- result{v, err}
		debug.FreeOSMemory()
	}()
	t := time.NewTimer(fileTimeout)
	defer t.Stop()
	select {
	case r := <-done:
		return r.v, r.err
	case <-t.C:
	}
	l.hung.Add(1)
	go func() {
		<-done
		l.hung.Add(-1)
	}()
	return zero, fmt.Errorf("%s: not read within %s (a hung network mount?), abandoned: %w", what, fileTimeout, errHung)
}
