package client

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	rl "github.com/raterlimiter/raterlimiter"
)

// Defaults of the batching mode.
const (
	// DefaultBatchMaxSize is the most checks one batch carries; it must not
	// exceed the sidecar's -max-batch (1000 by default).
	DefaultBatchMaxSize = 500
	// DefaultBatchInFlight is how many batches may be on their way at once:
	// one measured best here (BenchmarkBatching, README), and batches grow
	// while it travels.
	DefaultBatchInFlight = 1
)

// waiting is one CheckRate call waiting in the batcher.
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
type batcher struct {
	c       *Client
	in      chan waiting // unbuffered: a check is either taken or refused
	closed  chan struct{}
	done    chan struct{} // closed when the loop has returned
	window  time.Duration
	maxSize int
	slots   chan struct{} // one per batch on its way
}

func newBatcher(c *Client, window time.Duration, maxSize, inFlight int) *batcher {
	if maxSize <= 0 {
		maxSize = DefaultBatchMaxSize
	}
	if inFlight <= 0 {
		inFlight = DefaultBatchInFlight
	}
	b := &batcher{c: c, in: make(chan waiting), closed: make(chan struct{}), done: make(chan struct{}),
		window: max(window, 0), maxSize: maxSize, slots: make(chan struct{}, inFlight)}
	go b.loop()
	return b
}

// loop collects a batch from its first check until a batch may leave (fewer
// than inFlight are on their way) or it is full; then, with a window, it
// waits that long for more; then it takes every check already waiting to
// join, and sends the batch off while it collects the next. So under light
// load a check leaves at once, alone, and under heavy load batches grow to
// what arrives while the previous ones travel.
func (b *batcher) loop() {
	defer close(b.done)
	var timer *time.Timer
	if b.window > 0 {
		timer = time.NewTimer(time.Hour)
		timer.Stop()
	}
	for {
		var first waiting
		select {
		case first = <-b.in:
		case <-b.closed:
			return
		}
		batch := make([]waiting, 1, min(b.maxSize, 64))
		batch[0] = first
		closing := false
		slot := false
	wait:
		for len(batch) < b.maxSize {
			select {
			case w := <-b.in:
				batch = append(batch, w)
			case b.slots <- struct{}{}:
				slot = true
				break wait
			case <-b.closed:
				closing = true
				break wait
			}
		}
		if !slot && !closing {
			select { // a full batch waits for its turn
			case b.slots <- struct{}{}:
				slot = true
			case <-b.closed:
				closing = true
			}
		}
		if timer != nil && !closing {
			timer.Reset(b.window)
		window:
			for len(batch) < b.maxSize {
				select {
				case w := <-b.in:
					batch = append(batch, w)
				case <-timer.C:
					break window
				case <-b.closed:
					break window
				}
			}
			timer.Stop()
		}
	ready:
		for len(batch) < b.maxSize {
			select {
			case w := <-b.in:
				batch = append(batch, w)
			default:
				break ready
			}
		}
		go func() {
			b.flush(batch)
			if slot {
				<-b.slots
			}
		}()
	}
}

// flush sends one batch and answers each caller. Callers whose context has
// ended are left out (they have gone). If the sidecar refuses one item (a
// 400 naming its index, as when its -max-id-bytes is smaller than the
// client's), that caller gets the item's error and the rest are sent again:
// a refused batch counts nothing.
func (b *batcher) flush(batch []waiting) {
	live := make([]waiting, 0, len(batch))
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.reply <- answerOf{err: &Error{Err: err}}
			continue
		}
		live = append(live, w)
	}
	rs := make([]rl.Request, len(live))
	for len(live) > 0 {
		rs = rs[:len(live)]
		for i, w := range live {
			rs[i] = w.r
		}
		ds, err := b.c.checkRates(context.Background(), rs)
		var ie *rl.ItemError
		if errors.As(err, &ie) && ie.Index >= 0 && ie.Index < len(live) {
			live[ie.Index].reply <- answerOf{err: ie.Err}
			live = append(live[:ie.Index], live[ie.Index+1:]...)
			continue
		}
		for i, w := range live {
			if err != nil {
				w.reply <- answerOf{err: err}
			} else {
				w.reply <- answerOf{d: ds[i]}
			}
		}
		return
	}
}

// check sends r through the batcher and waits for its answer or ctx.
func (b *batcher) check(ctx context.Context, r rl.Request) (rl.Decision, error) {
	w := waiting{ctx: ctx, r: r, reply: make(chan answerOf, 1)}
	select {
	case b.in <- w:
	case <-b.closed:
		return rl.Decision{}, rl.ErrClosed
	case <-ctx.Done():
		return rl.Decision{}, &Error{Err: ctx.Err()}
	}
	select {
	case a := <-w.reply:
		return a.d, a.err
	case <-ctx.Done():
		return rl.Decision{}, &Error{Err: ctx.Err()}
	}
}

// batchable reports whether r can travel in a batch (JSON carries text).
func batchable(r rl.Request) bool { return utf8.ValidString(r.ID) }
