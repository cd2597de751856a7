package client

import (
	"context"
	"errors"
	"sync"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
)

// defaultBatchMaxSize is the most checks one batch carries when only
// BatchWindow turns batching on; it must not exceed the sidecar's
// -max-batch (1,000 by default).
const defaultBatchMaxSize = 500

// waiting is one CheckRate call waiting in the batcher. A caller that got
// its answer returns its waiting to the pool; one that left on its
// context's end does not (the batch may still answer it).
type waiting struct {
	ctx   context.Context
	r     rl.Request
	reply chan answerOf // buffered: the batcher never blocks on a caller
}

type answerOf struct {
	d   rl.Decision
	err error
}

// batcher coalesces concurrent CheckRate calls into POST /check_rates.
//
// Callers append to a queue under a mutex (no channel operation or select
// per check on the way in); a flight is a goroutine that takes the queue,
// up to maxSize checks, sends it, answers its callers, and goes on while
// checks are waiting, or ends. At most one flight runs, since the checks
// that arrive while a batch travels make the next one: a check that finds
// none starts one. So under light load a check leaves at once, alone, and
// under heavy load each batch holds what arrived while the previous one
// travelled, growing with the load without a window to wait out.
type batcher struct {
	c       *Client
	closed  chan struct{} // closed by close
	window  time.Duration
	maxSize int
	pool    sync.Pool // of *waiting

	mu      sync.Mutex
	queue   []*waiting
	full    chan struct{}  // if not nil, closed when the queue holds maxSize
	flying  bool           // a flight runs
	shut    bool           // set by close: no new flights
	flights sync.WaitGroup // the flights, for Close
}

func newBatcher(c *Client, window time.Duration, maxSize int) *batcher {
	if maxSize <= 0 {
		maxSize = defaultBatchMaxSize
	}
	b := &batcher{c: c, closed: make(chan struct{}), window: max(window, 0), maxSize: maxSize}
	b.pool.New = func() any { return &waiting{reply: make(chan answerOf, 1)} }
	return b
}

// close starts no more flights and waits for those flying, which answer
// what is queued (ErrClosed, as the client is closed).
func (b *batcher) close() {
	b.mu.Lock()
	b.shut = true
	b.mu.Unlock()
	close(b.closed)
	b.flights.Wait()
}

// check sends r through the batcher and waits for its answer or ctx.
func (b *batcher) check(ctx context.Context, r rl.Request) (rl.Decision, error) {
	w := b.pool.Get().(*waiting)
	w.ctx, w.r = ctx, r
	b.mu.Lock()
	if b.shut {
		b.mu.Unlock()
		b.pool.Put(w)
		return rl.Decision{}, rl.ErrClosed
	}
	b.queue = append(b.queue, w)
	if b.full != nil && len(b.queue) >= b.maxSize {
		close(b.full)
		b.full = nil
	}
	start := !b.flying
	if start {
		b.flying = true
		b.flights.Add(1)
	}
	b.mu.Unlock()
	if start {
		go b.fly()
	}
	select {
	case a := <-w.reply:
		w.ctx = nil
		b.pool.Put(w)
		return a.d, a.err
	case <-ctx.Done(): // never, for a context that cannot end
		return rl.Decision{}, &Error{Err: ctx.Err()}
	}
}

// flight is the reusable state of one flight.
type flight struct {
	batch []*waiting
	live  []*waiting
	reqs  []rl.Request
	ds    []rl.Decision
	body  []byte
}

// fly sends batches while checks are waiting, then ends.
func (b *batcher) fly() {
	defer b.flights.Done()
	var f flight
	var timer *time.Timer
	if b.window > 0 {
		timer = time.NewTimer(b.window)
		defer timer.Stop()
	}
	for {
		if timer != nil {
			b.waitWindow(timer)
		}
		b.mu.Lock()
		n := min(len(b.queue), b.maxSize)
		if n == 0 {
			b.flying = false
			b.mu.Unlock()
			return
		}
		f.batch = append(f.batch[:0], b.queue[:n]...)
		rest := copy(b.queue, b.queue[n:])
		clear(b.queue[rest:])
		b.queue = b.queue[:rest]
		b.mu.Unlock()
		b.flush(&f)
		clear(f.batch)
	}
}

// waitWindow waits for the window to pass or the queue to fill.
func (b *batcher) waitWindow(timer *time.Timer) {
	b.mu.Lock()
	if len(b.queue) >= b.maxSize {
		b.mu.Unlock()
		return
	}
	if b.full == nil {
		b.full = make(chan struct{})
	}
	full := b.full
	b.mu.Unlock()
	timer.Reset(b.window)
	select {
	case <-timer.C:
	case <-full:
		timer.Stop()
	case <-b.closed:
		timer.Stop()
	}
}

// flush sends f.batch and answers each caller. Callers whose context has
// ended are left out (they have gone). If the sidecar refuses one item (a
// 400 naming its index, as when its -max-id-bytes is smaller than the
// client's), that caller gets the item's error and the rest are sent again:
// a refused batch counts nothing.
func (b *batcher) flush(f *flight) {
	f.live = f.live[:0]
	for _, w := range f.batch {
		if err := w.ctx.Err(); err != nil {
			w.reply <- answerOf{err: &Error{Err: err}}
			continue
		}
		f.live = append(f.live, w)
	}
	defer clear(f.live)
	for len(f.live) > 0 {
		f.reqs = f.reqs[:0]
		for _, w := range f.live {
			f.reqs = append(f.reqs, w.r)
		}
		// The flight's buffers are reused: the exchange runs under no
		// context that could abandon it, so the body is not read after post
		// returns.
		var err error
		f.body, f.ds, err = b.c.post(context.Background(), f.reqs, f.body, f.ds)
		clear(f.reqs) // drop the ids
		var ie *rl.ItemError
		if errors.As(err, &ie) && ie.Index >= 0 && ie.Index < len(f.live) {
			f.live[ie.Index].reply <- answerOf{err: ie.Err}
			f.live = append(f.live[:ie.Index], f.live[ie.Index+1:]...)
			continue
		}
		if err != nil {
			for _, w := range f.live {
				w.reply <- answerOf{err: err}
			}
			return
		}
		now := b.c.cfg.Clock()
		for i, w := range f.live {
			d := f.ds[i]
			d.Now = now
			w.reply <- answerOf{d: d}
		}
		return
	}
}
