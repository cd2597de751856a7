package api

import (
	"cmp"
	"strconv"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/policy"
)

// DefaultMaxWait bounds how long the sidecar holds an answer (wait=1, a
// policy's wait: true) when Config.MaxWait is 0.
const DefaultMaxWait = 10 * time.Second

// Holding an answer: a leaky check allowed with a delay (delay_ms) is its
// caller's to wait, unless it asked the sidecar to (wait=1, or a policy's
// wait: true): then the answer leaves when the request's turn comes, so a
// proxy's /auth delays the request itself, as nginx's limit_req without
// nodelay. The wait is bounded by MaxWait: the check carries it as its
// bound on the delay (raterlimiter.Request.MaxDelayMS), so a longer one is
// a 429 at once that took no place in the queue, never a hang. A held
// answer is released when the server shuts down (it is answered at once,
// as decided: an admitted request is not turned into an error), and holds
// a fasthttp worker and its connection meanwhile, nothing else.

// applyWait makes a check by policy p wait when p says so and the check did
// not say otherwise (wait=0 answers at once).
func applyWait(p *policy.Policy, opts *checkOpts) {
	if !opts.waitGiven {
		opts.wait = p.Wait
	}
}

// boundDelay returns the bound on the delay of a held check: the caller's
// own (max_delay_ms), or the server's MaxWait when smaller or unset.
func (s *Server) boundDelay(own int64) int64 {
	if own > 0 && own < s.maxWaitMS {
		return own
	}
	return s.maxWaitMS
}

// hold waits d.DelayMS ms before the answer leaves, or less if the server
// shuts down (Shutdown closes stopping before it waits for the requests in
// flight). It reports how long it held.
func (s *Server) hold(d rl.Decision) time.Duration {
	if !d.Allowed || d.DelayMS <= 0 {
		return 0
	}
	start := time.Now()
	t := time.NewTimer(time.Duration(d.DelayMS) * time.Millisecond)
	defer t.Stop()
	s.metrics.held.Inc()
	defer s.metrics.held.Dec()
	select {
	case <-t.C:
	case <-s.stopping:
	}
	return time.Since(start)
}

// holdAuth holds an allowed /auth answer until the turn of its policies
// that wait: the longest delay among them.
func (s *Server) holdAuth(rs []policy.Result) {
	var longest rl.Decision
	for i := range rs {
		r := &rs[i]
		if r.Denies() {
			return
		}
		if r.Rule.Wait && r.Decision.Allowed && r.Decision.DelayMS > longest.DelayMS {
			longest = r.Decision
		}
	}
	s.hold(longest)
}

// appendShapingFields closes a decision's JSON object by policy with the
// policy's slices (algo slices) or queue (algo leaky), so a caller that
// checks by name learns the whole limit.
func appendShapingFields(dst []byte, p *policy.Policy) []byte {
	switch p.Algo {
	case rl.Slices:
		dst = append(dst, `,"slices":`...)
		dst = strconv.AppendInt(dst, cmp.Or(p.Slices, rl.DefaultSlices), 10)
	case rl.Leaky:
		dst = append(dst, `,"queue":`...)
		dst = strconv.AppendInt(dst, p.Queue, 10)
	}
	return append(dst, '}')
}
