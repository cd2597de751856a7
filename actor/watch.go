package actor

import (
	"context"

	"github.com/raterlimiter/raterlimiter/internal/ms"
)

// The watched hand-off (CheckRate of a request with ms.Request.Shared set):
// a caller parks on its reply channel alone, without a select on
// ctx.Done(). On this 2-core VM the
// select cost the sidecar about 0.3 µs a request: every handler shares one
// deadline context (api/deadline.go), and each select locked its Done
// channel twice, from both processors (docs/perf-notes.md).
//
// Who answers a caller whose context ends before its check is decided:
//
//   - while its message waits in the mailbox: the actor's watcher, a
//     function context.AfterFunc runs when a watched context ends. It takes
//     the mailbox whole (as the actor's grab does), abandons and answers
//     with the context's error every watched message whose context has
//     ended and that is still queued, and puts the others back;
//   - while the actor holds it, taken from the mailbox but not yet
//     decided: the actor, which reaches it within one pass (a message whose
//     deadline passed is skipped and answered as ever). Before it runs a
//     function message (Do: a snapshot's chunk, a held shard), which may
//     take long, the actor puts the messages it holds back in the mailbox,
//     where the watcher finds them;
//   - a context that had ended when its caller pushed (the watcher may have
//     run before the message arrived): the caller itself, which looks at
//     ctx.Err() after the push.
//
// A message is abandoned or taken by one compare-and-swap, whoever comes
// first, so a caller answered with an error was never counted, as with the
// select.

// watch is one context the actor's watcher waits on.
type watch struct {
	ctx context.Context
}

// watchSlots is how many recent contexts an actor remembers registering:
// the sidecar's requests share one context per tenth of its timeout, and
// around a renewal two are in use at once.
const watchSlots = 2

// watchCtx makes sure the watcher runs when ctx ends. A context seen
// recently costs two atomic loads; another registers a context.AfterFunc.
func (a *Actor) watchCtx(ctx context.Context) {
	for i := range a.watched {
		if w := a.watched[i].Load(); w != nil && w.ctx == ctx {
			return
		}
	}
	context.AfterFunc(ctx, a.expireWatched)
	i := a.watchNext.Add(1) % watchSlots
	a.watched[i].Store(&watch{ctx: ctx})
}

// checkRateWatched is CheckRate for a caller whose context is shared by
// many calls (r.Shared; one registration of context.AfterFunc serves them
// all) and has a Done channel: it answers as CheckRate does, the same
// errors included, without a select on ctx.Done() per call. CheckRate has
// tried the denied fast path.
func (a *Actor) checkRateWatched(ctx context.Context, r ms.Request) (ms.Decision, error) {
	a.watchCtx(ctx)
	m := msgPool.Get().(*msg)
	m.kind, m.req, m.ctx = kindCheck, r, ctx
	m.state.Store(queued)
	if d, ok := ctx.Deadline(); ok {
		m.deadline = d.UnixNano()
	} else {
		m.deadline = 0
	}
	if err := a.push(ctx, m); err != nil {
		m.ctx = nil
		return ms.Decision{}, err
	}
	// Registered before the push: a watcher that ran before it is seen
	// here, one that runs after finds the message.
	if ctx.Err() != nil && m.state.CompareAndSwap(queued, abandoned) {
		return ms.Decision{}, gaveUp(ctx) // m stays with the mailbox
	}
	<-m.ready
	res := m.res
	m.req, m.res, m.ctx = ms.Request{}, result{}, nil
	msgPool.Put(m) // answered: neither the actor nor the watcher holds it
	return res.d, res.err
}

// expireWatched is the watcher: it takes the mailbox, answers the watched
// messages whose context has ended with the context's error, drops the
// messages their callers abandoned, and puts the rest back.
func (a *Actor) expireWatched() {
	var h *msg
	for {
		h = a.head.Load()
		if h == nil || h == closedQueue {
			return
		}
		if a.head.CompareAndSwap(h, nil) {
			break
		}
	}
	// h is the stack, newest first; keep is rebuilt newest first too.
	var keep, tail *msg
	for m := h; m != nil; {
		next := m.next // m may belong to its caller once answered
		switch {
		case m.state.Load() != queued:
			// Abandoned by a caller that selected on its context: skipped.
		case m.ctx != nil && m.ctx.Err() != nil && m.state.CompareAndSwap(queued, abandoned):
			m.answer(result{err: gaveUp(m.ctx)})
		default:
			m.next = nil
			if tail == nil {
				keep = m
			} else {
				tail.next = m
			}
			tail = m
		}
		m = next
	}
	a.requeue(keep, tail)
}

// requeue puts the stack from top to bottom (newest first, bottom.next
// nil) back on the mailbox, above what was pushed meanwhile, and wakes the
// actor if it sleeps. After Close the messages are answered with
// raterlimiter.ErrClosed.
func (a *Actor) requeue(top, bottom *msg) {
	if top == nil {
		return
	}
	n := int32(0)
	for m := top; m != nil; m = m.next {
		n++
	}
	for {
		h := a.head.Load()
		if h == closedQueue {
			bottom.next = nil
			closeAll(top)
			return
		}
		var base int32
		if h != nil {
			base = h.depth.Load()
		}
		bottom.next = h
		d := base + n
		for m := top; m != h; m = m.next {
			m.depth.Store(d)
			d--
		}
		if a.head.CompareAndSwap(h, top) {
			break
		}
	}
	if a.sleeping.Load() && a.sleeping.CompareAndSwap(true, false) {
		a.wake <- struct{}{}
	}
}

// handBack puts the messages the actor holds, taken from the mailbox but
// not handled (the list l, oldest first), back in the mailbox, where the
// watcher can reach them.
func (a *Actor) handBack(l *msg) {
	if l == nil {
		return
	}
	var top *msg
	bottom := l
	for m := l; m != nil; {
		next := m.next
		m.next = top
		top = m
		m = next
	}
	a.requeue(top, bottom)
}
