package api

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// deadlines hands out contexts that end between timeout and timeout+slack
// after the moment they are asked for. A context (and its timer) is shared
// by every request that starts within one slack period, so the hot path
// neither allocates nor touches the runtime's timer heap per request, which
// a context.WithTimeout per request would (a timer each: a large share of
// the API's own cost; lab/notes/perf-notes.md, "The sidecar's HTTP path").
type deadlines struct {
	timeout, slack time.Duration
	cur            atomic.Pointer[deadline]
	mu             sync.Mutex // serialises renewals
}

type deadline struct {
	ctx     context.Context
	cancel  context.CancelFunc
	renewAt int64 // Unix ns after which a new context is due
}

func newDeadlines(timeout time.Duration) *deadlines {
	return &deadlines{timeout: timeout, slack: max(timeout/10, time.Millisecond)}
}

// get returns a context whose deadline lies between timeout and
// timeout+slack after now.
func (d *deadlines) get(now time.Time) context.Context {
	ns := now.UnixNano()
	if p := d.cur.Load(); p != nil && ns < p.renewAt {
		return p.ctx
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if p := d.cur.Load(); p != nil && ns < p.renewAt {
		return p.ctx
	}
	// The old context is left to its own timer, which ends it (and frees
	// it) at its deadline: requests may still be using it.
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(d.timeout+d.slack))
	d.cur.Store(&deadline{ctx: ctx, cancel: cancel, renewAt: ns + int64(d.slack)})
	return ctx
}
