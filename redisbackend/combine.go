package redisbackend

import (
	"context"
	"time"

	"github.com/redis/rueidis"
)

// Single checks from concurrent callers are combined: a caller queues its
// commands and waits; a few sender goroutines each take what is queued (up
// to combineMax commands) and send it with one DoMulti, so the client
// pays its per-call hand-offs once per group instead of once per check.

const (
	combineSenders = 4
	combineMax     = 64
)

type combined struct {
	cmds     rueidis.Commands
	deadline time.Time // zero: none
	res      chan []rueidis.RedisResult
}

func (b *Backend) startSenders() {
	b.queue = make(chan *combined, b.cfg.MaxInFlight)
	for range combineSenders {
		b.wg.Add(1)
		go b.sender()
	}
}

func (b *Backend) sender() {
	defer b.wg.Done()
	batch := make([]*combined, 0, combineMax)
	for {
		var first *combined
		select {
		case first = <-b.queue:
		case <-b.done:
			return
		}
		batch = append(batch[:0], first)
		n := len(first.cmds)
	drain:
		for n < combineMax {
			select {
			case c := <-b.queue:
				batch = append(batch, c)
				n += len(c.cmds)
			default:
				break drain
			}
		}
		// A new slice each time: rueidis may still be writing the last one
		// when a deadline ended DoMulti's wait.
		cmds := make(rueidis.Commands, 0, n)
		var latest time.Time
		for _, c := range batch {
			cmds = append(cmds, c.cmds...)
			if c.deadline.After(latest) {
				latest = c.deadline
			}
		}
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if !latest.IsZero() {
			ctx, cancel = context.WithDeadline(ctx, latest)
		}
		var res []rueidis.RedisResult
		if cl := b.conn(); cl != nil {
			res = cl.DoMulti(ctx, cmds...)
		}
		cancel()
		for _, c := range batch {
			if res == nil {
				c.res <- errorResults(len(c.cmds), errNotConnected)
				continue
			}
			c.res <- res[:len(c.cmds):len(c.cmds)]
			res = res[len(c.cmds):]
		}
		clear(batch)
	}
}

// doCombined sends cmds with the other queued single checks and waits for
// their answers, as long as ctx allows.
func (b *Backend) doCombined(ctx context.Context, cmds rueidis.Commands) []rueidis.RedisResult {
	c := &combined{cmds: cmds, res: make(chan []rueidis.RedisResult, 1)}
	c.deadline, _ = ctx.Deadline()
	select {
	case b.queue <- c:
	case <-ctx.Done():
		return errorResults(len(cmds), ctx.Err())
	}
	select {
	case r := <-c.res:
		return r
	case <-ctx.Done():
		return errorResults(len(cmds), ctx.Err())
	}
}

// errorResults is n results that each fail with err.
func errorResults(n int, err error) []rueidis.RedisResult {
	out := make([]rueidis.RedisResult, n)
	for i := range out {
		out[i] = rueidis.NewErrorResult(err)
	}
	return out
}
