package api

import (
	"net/netip"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

// defaultMaxWait bounds how long the sidecar holds an answer (wait=1, a
// policy's wait: true) when Config.MaxWait is 0.
const defaultMaxWait = 10 * time.Second

// Defaults of the bounds on how many answers are held at once.
const (
	// defaultMaxHeld is Config.MaxHeld's default: half of
	// defaultMaxConnsPerIP, the bound on a proxy's connections when it is
	// not in -trusted-proxies.
	defaultMaxHeld = 512
	// defaultMaxHeldPerClient is Config.MaxHeldPerClient's default.
	defaultMaxHeldPerClient = 32
)

// addrCount counts what each client address holds (connections, held
// answers), and the total over every address. It is safe for concurrent
// use.
type addrCount struct {
	mu    sync.Mutex
	total int
	by    map[netip.Addr]int
}

// take counts one more for a, unless a holds perAddr already (negative: no
// bound) or the total is most, and reports whether it did.
func (c *addrCount) take(a netip.Addr, perAddr, most int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.by[a]
	if (perAddr >= 0 && n >= perAddr) || c.total >= most {
		return false
	}
	c.by[a] = n + 1
	c.total++
	return true
}

// give takes back one that take counted for a.
func (c *addrCount) give(a netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if n := c.by[a]; n <= 1 {
		delete(c.by, a)
	} else {
		c.by[a] = n - 1
	}
}

// noWaitMS is the bound on the delay of a check that finds no place to be
// held: a queue that makes it wait denies it at once, and it takes no
// place there (a delay of a millisecond is answered without holding).
const noWaitMS = 1

// clientAddr is the address a held answer is counted against: the client
// as the policies' ip key reads it (behind a trusted proxy, the address
// the proxy forwards), or the peer without policies.
func (s *Server) clientAddr(ctx *fasthttp.RequestCtx, st *policyState) netip.Addr {
	in := policy.Input{Peer: peerAddr(ctx), Header: &ctx.Request.Header}
	if st == nil {
		return in.Peer
	}
	return st.file.ClientIP(&in)
}

// takeHold reserves a place for a held answer of client; when there is
// none it counts the refusal, and the check must then be bounded by
// noWaitMS.
func (s *Server) takeHold(client netip.Addr) bool {
	if s.holds.take(client, s.cfg.MaxHeldPerClient, s.cfg.MaxHeld) {
		return true
	}
	s.metrics.heldRefused.Inc()
	return false
}

// waits reports whether a check of checks asks its answer to be held.
func waits(checks []policy.Check) bool {
	for i := range checks {
		c := &checks[i]
		if c.Rule.Wait && !c.Rule.Unlimited && !c.MissingKey && c.BadKey == policy.KeyFine {
			return true
		}
	}
	return false
}

// Holding an answer: a leaky check allowed with a delay (delay_ms) is its
// caller's to wait, unless it asked the sidecar to (wait=1, or a policy's
// wait: true): then the answer leaves when the request's turn comes, so a
// proxy's /auth delays the request itself, as nginx's limit_req without
// nodelay. The wait is bounded by MaxWait: the check carries it as its
// bound on the delay (raterlimiter.Request.MaxDelay), so a longer one is
// a 429 at once that took no place in the queue, never a hang. The answers
// held at once are bounded too, over the server (MaxHeld) and per client
// address (MaxHeldPerClient): a check that asks to wait when its client
// holds its bound may not wait at all (its bound on the delay is noWaitMS),
// so it is denied at once if the queue would make it wait. A held answer
// is released when the server shuts down (it is answered at once, as
// decided: an admitted request is not turned into an error), and holds a
// fasthttp worker and its connection meanwhile, nothing else.

// hold waits d.Delay before the answer leaves, or less if the server
// shuts down (Shutdown closes stopping before it waits for the requests in
// flight).
func (s *Server) hold(d rl.Decision) {
	if !d.Allowed || d.Delay <= 0 {
		return
	}
	t := time.NewTimer(d.Delay)
	defer t.Stop()
	s.metrics.held.Inc()
	defer s.metrics.held.Dec()
	select {
	case <-t.C:
	case <-s.stopping:
	}
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
		if r.Rule.Wait && r.Decision.Allowed && r.Decision.Delay > longest.Delay {
			longest = r.Decision
		}
	}
	s.hold(longest)
}
