package redisbackend

import (
	"context"
	"time"

	"github.com/redis/rueidis"
)

// Single checks from concurrent callers are combined: a caller queues its
// command and waits; a few sender goroutines each take what is queued (up
// to combineMax commands) and send it with one DoMulti, so the client
// pays its per-call hand-offs once per group instead of once per check.

const (
	combineSenders = 4
	combineMax     = 64
)

type combined struct {
	cmd      rueidis.Completed
	deadline time.Time // zero: none
	res      chan rueidis.RedisResult
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
	drain:
		for len(batch) < combineMax {
			select {
			case c := <-b.queue:
				batch = append(batch, c)
			default:
				break drain
			}
		}
		// A new slice each time: rueidis may still be writing the last one
		// when a deadline ended DoMulti's wait.
		cmds := make(rueidis.Commands, 0, len(batch))
		var latest time.Time
		for _, c := range batch {
			cmds = append(cmds, c.cmd)
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
		for i, c := range batch {
			if res == nil {
				c.res <- rueidis.NewErrorResult(errNotConnected)
				continue
			}
			c.res <- res[i]
		}
		clear(batch)
	}
}

// doCombined sends cmd with the other queued single checks and waits for
// its answer, as long as ctx allows.
func (b *Backend) doCombined(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c := &combined{cmd: cmd, res: make(chan rueidis.RedisResult, 1)}
	c.deadline, _ = ctx.Deadline()
	select {
	case b.queue <- c:
	case <-ctx.Done():
		return rueidis.NewErrorResult(ctx.Err())
	}
	select {
	case r := <-c.res:
		return r
	case <-ctx.Done():
		return rueidis.NewErrorResult(ctx.Err())
	}
}
