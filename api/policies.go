package api

import (
	"cmp"
	"errors"
	"net/netip"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/headers"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/checkmetric"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

// policyState is the policies file in force and its metric series, swapped
// whole on a reload.
type policyState struct {
	file *policy.File
	// counters are each policy's checks by result, resolved once.
	counters map[*policy.Rule]*[checkmetric.NumResults]prometheus.Counter
}

// policyCheck is how one request resolves policies: the file in force and
// whether checks must name a policy. It is made per request, on the stack.
type policyCheck struct {
	st   *policyState
	only bool
}

// finish completes a check whose fields are seen and whose id is id. A
// check by policy (one that names it, or any under -policies-only) takes
// id and hits only: its scale, limit, algo and (unless given) hits come
// from the policy named name, and its wait (unless given, and unless opts
// is nil: a batch's item); finish returns that policy. The caller sets r.ID
// to its counter id. Any other check must give the fields an explicit
// check needs.
func (pc *policyCheck) finish(r *rl.Request, name []byte, seen fields, id []byte, opts *checkOpts) (*policy.Policy, error) {
	switch {
	case seen&fieldPolicy == 0 && !pc.only:
		return nil, seen.missing()
	case seen&fieldPolicy == 0:
		return nil, &rl.FieldError{Field: "policy", Rule: "is required: this sidecar runs with -policies-only, so limits come from its policies"}
	case seen&fieldsOfPolicy != 0:
		return nil, &rl.FieldError{Field: "policy", Rule: "takes id and hits only: scale, limit, algo, slices and queue are the policy's"}
	case seen&fieldID == 0:
		return nil, &rl.FieldError{Field: "id", Rule: "is required"}
	case len(id) == 0:
		return nil, &rl.FieldError{Field: "id", Rule: "must not be empty"}
	case pc.st == nil:
		return nil, &rl.FieldError{Field: "policy", Rule: "no policies are loaded (start the sidecar with -policies FILE)"}
	}
	p := pc.st.file.Lookup(string(name))
	if p == nil {
		return nil, &rl.FieldError{Field: "policy", Rule: "no policy named " + strconv.Quote(string(name))}
	}
	r.Scale, r.Limit, r.Algo, r.Slices, r.Queue = millis.Duration(p.Scale), p.Limit, p.Algo, p.Slices, p.Queue
	if seen&fieldHits == 0 {
		r.Hits = p.Hits
	}
	if opts != nil && !opts.waitGiven {
		opts.wait = p.Wait
	}
	return p, nil
}

// counterID returns the id p counts key under.
func counterID(p *policy.Policy, key []byte) string {
	var buf [256]byte
	return string(policy.CounterID(buf[:0], p.Name, key))
}

func (s *Server) policyCheck() policyCheck {
	return policyCheck{st: s.pols.Load(), only: s.cfg.PoliciesOnly}
}

// policyMetrics are the series of gateway mode.
type policyMetrics struct {
	checks         *prometheus.CounterVec // policy, result
	reloads        *prometheus.CounterVec // result
	removed        prometheus.Counter
	lastReload     prometheus.Gauge
	policiesLoaded prometheus.Gauge
}

func newPolicyMetrics(reg *prometheus.Registry) *policyMetrics {
	m := &policyMetrics{
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raterlimiter_policy_checks_total",
			Help: "Checks by server-side policy (/auth, and /check_rate with policy=) and result. One series per policy of the file in force (at most " + strconv.Itoa(policy.MaxPolicies) + ").",
		}, []string{"policy", "result"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raterlimiter_policy_reloads_total",
			Help: "Reloads of the policies file (SIGHUP or POST /reload), by result (ok, failed). A failed reload keeps the rules in force.",
		}, []string{"result"}),
		removed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raterlimiter_policies_removed_total",
			Help: "Policies that reloads of the policies file took away (each named in a WARN line): the requests they matched are no longer limited by them.",
		}),
		lastReload: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "raterlimiter_policy_last_reload_success_timestamp_seconds",
			Help: "When the policies file in force was loaded, Unix seconds.",
		}),
		policiesLoaded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "raterlimiter_policies",
			Help: "Policies in the file in force.",
		}),
	}
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("failed")
	reg.MustRegister(m.checks, m.reloads, m.removed, m.lastReload, m.policiesLoaded)
	return m
}

// setPolicies puts f in force (nil: none). Counters live in the limiter
// under ids made of a policy's name and a key, so the policies of f that
// keep their name, scale and algo keep their counts. The policies f no
// longer has are named in a WARN line and counted (a file cut short by a
// write in place drops the policies at its end), and their metric series
// dropped.
func (s *Server) setPolicies(f *policy.File) {
	old := s.pols.Load()
	if f == nil {
		s.pols.Store(nil)
		s.pmetrics.policiesLoaded.Set(0)
		return
	}
	st := &policyState{file: f, counters: make(map[*policy.Rule]*[checkmetric.NumResults]prometheus.Counter, len(f.Policies))}
	names := make(map[string]bool, len(f.Policies))
	for i := range f.Policies {
		p := &f.Policies[i]
		var cs [checkmetric.NumResults]prometheus.Counter
		for r := range checkmetric.NumResults {
			cs[r] = s.pmetrics.checks.WithLabelValues(p.Name, checkmetric.ResultNames[r])
		}
		st.counters[&p.Rule] = &cs
		names[p.Name] = true
	}
	s.pols.Store(st)
	s.pmetrics.policiesLoaded.Set(float64(len(f.Policies)))
	s.pmetrics.lastReload.Set(float64(time.Now().UnixMilli()) / 1000)
	if old != nil {
		var gone []string
		for _, p := range old.file.Policies {
			if !names[p.Name] {
				gone = append(gone, p.Name)
				s.pmetrics.checks.DeletePartialMatch(prometheus.Labels{"policy": p.Name})
			}
		}
		if len(gone) > 0 {
			s.pmetrics.removed.Add(float64(len(gone)))
			s.cfg.Logger.Warn("the reloaded policies file removes policies: the requests they matched are no longer limited by them", "removed", gone)
		}
	}
}

// ErrNoPolicies is returned by ReloadPolicies when the server has no
// policies file to reload.
var ErrNoPolicies = errors.New("api: no policies file to reload (start with -policies FILE)")

// ReloadPolicies loads the policies file again (Config.LoadPolicies) and
// puts it in force. A file that does not load leaves the rules in force as
// they were; the error is logged, counted in
// raterlimiter_policy_reloads_total{result="failed"} and returned.
func (s *Server) ReloadPolicies() error {
	if s.cfg.LoadPolicies == nil {
		return ErrNoPolicies
	}
	f, err := s.cfg.LoadPolicies()
	if err != nil {
		s.pmetrics.reloads.WithLabelValues("failed").Inc()
		s.cfg.Logger.Error("policies not reloaded: the rules in force stay", "err", err)
		return err
	}
	s.setPolicies(f)
	s.pmetrics.reloads.WithLabelValues("ok").Inc()
	s.cfg.Logger.Info("policies reloaded", "file", f.Path, "policies", len(f.Policies))
	return nil
}

// countPolicy counts res for the rule r of st, the policies a check by
// policy was resolved in.
func (s *Server) countPolicy(st *policyState, r *policy.Rule, res checkmetric.Result) {
	if cs := st.counters[r]; cs != nil {
		cs[res].Inc()
	}
}

// reload serves POST /reload (admin).
func (s *Server) reload(ctx *fasthttp.RequestCtx) {
	if !s.requireAdmin(ctx, "/reload") {
		return
	}
	err := s.ReloadPolicies()
	switch {
	case errors.Is(err, ErrNoPolicies):
		s.fail(ctx, fasthttp.StatusConflict, err.Error())
	case err != nil:
		s.fail(ctx, fasthttp.StatusUnprocessableEntity, "api: the policies file did not load; the rules in force stay: "+err.Error())
	default:
		st := s.pols.Load()
		b := append([]byte(nil), `{"reloaded":true,"policies":`...)
		b = strconv.AppendInt(b, int64(len(st.file.Policies)), 10)
		b = append(b, '}')
		ctx.SetContentType("application/json")
		ctx.SetBody(b)
	}
}

// authScratch is the reusable state of one /auth request.
type authScratch struct {
	checks  []policy.Check
	keys    []byte
	path    []byte
	results []policy.Result
	hdr     []byte
	body    []byte
}

// auth serves /auth (any method) for nginx auth_request, Caddy forward_auth
// and Traefik ForwardAuth: every policy that matches the original request
// is checked, and the request is allowed iff all allow. The original
// request is read from the headers of the proxy AuthHeaders names, and its
// path as policy.CleanPath reads it.
func (s *Server) auth(ctx *fasthttp.RequestCtx) {
	start := startTime(ctx)
	st := s.pols.Load()
	if st == nil || s.cfg.AuthHeaders == policy.GatewayUnset {
		// Not served until the sidecar is restarted with a file and the
		// proxy named: a long Retry-After, so no client spins on it.
		msg := "api: /auth needs policies: start the sidecar with -policies FILE"
		if st != nil {
			msg = "api: /auth needs -auth-headers nginx, caddy or traefik: the proxy whose headers carry the original request (a client's copies of the others are not believed)"
		}
		ctx.Response.Header.Set("Retry-After", "60")
		s.metrics.check(endpointAuth, rl.Fixed, checkmetric.Unavailable)
		s.fail(ctx, fasthttp.StatusServiceUnavailable, msg)
		return
	}
	denyStatus := s.cfg.AuthDenyStatus
	// nginx asks the URI its configuration names; Caddy's forward_auth
	// passes the client's own query on, so there the query is not read.
	if s.cfg.AuthHeaders == policy.GatewayNginx {
		var err error
		if denyStatus, err = authArgs(ctx.QueryArgs(), denyStatus); err != nil {
			s.metrics.check(endpointAuth, rl.Fixed, checkmetric.Invalid)
			s.invalid(ctx, err)
			return
		}
	}
	h := &ctx.Request.Header
	// A key longer than an id may be is the client's own doing: a denial
	// (policy.KeyTooLong), not an error the proxy would turn into a 500.
	in := policy.Input{Header: h, Peer: peerAddr(ctx), MaxKeyBytes: s.cfg.MaxIDBytes}
	var target []byte
	var missing string
	if in.Method, target, in.Host, missing = s.cfg.AuthHeaders.Original(h); missing != "" {
		s.metrics.check(endpointAuth, rl.Fixed, checkmetric.Invalid)
		s.fail(ctx, fasthttp.StatusBadRequest, "api: /auth: the request has no "+missing+
			": the proxy in front is not set up as docs/gateways.md shows for -auth-headers "+s.cfg.AuthHeaders.String())
		return
	}

	sc := s.authScratch.Get().(*authScratch)
	defer s.authScratch.Put(sc)
	var err error
	if sc.path, err = policy.CleanPath(&in.Path, target, sc.path[:0]); err != nil {
		// A path no backend reads alike is refused, never matched
		// against nothing. The client is denied, and counted so.
		s.metrics.check(endpointAuth, rl.Fixed, checkmetric.Denied)
		ctx.SetStatusCode(denyStatus)
		if s.cfg.AuthHeaders != policy.GatewayNginx { // nginx reads no body (writeAuth)
			ctx.SetContentType("application/json")
			ctx.SetBodyString(`{"allowed":false,"error":"api: /auth: the original request's path cannot be decoded (a percent sign without two hex digits, a raw '#', or no path)"}`)
		}
		return
	}
	sc.checks, sc.keys = st.file.Match(&in, sc.checks[:0], sc.keys[:0])
	if len(sc.checks) == 0 {
		return // allowed, no body (writeAuth)
	}
	engine := &s.engine
	if waits(sc.checks) {
		client := s.clientAddr(ctx, st)
		if s.takeHold(client) {
			defer s.holds.give(client) // after holdAuth
		} else {
			// No place to be held: a check the queue would make wait
			// is denied at once, and takes no place there.
			noWait := s.engine
			noWait.MaxWaitMS = noWaitMS
			engine = &noWait
		}
	}
	sc.results, err = engine.Decide(s.deadlines.get(start), sc.checks, sc.results[:0])
	if err != nil {
		res := s.limiterFailed(ctx, err)
		if s.cfg.AuthHeaders == policy.GatewayNginx {
			// A client can bring these about (a flood, a backend down):
			// they must not cost nginx its connections either (writeAuth).
			ctx.Response.ResetBody()
			ctx.Response.Header.SetContentTypeBytes(nil)
		}
		for i := range sc.checks {
			s.countPolicy(st, sc.checks[i].Rule, res)
			s.metrics.check(endpointAuth, sc.checks[i].Rule.Algo, res)
		}
		return
	}
	for i := range sc.results {
		if sc.results[i].Decision.Degraded() {
			markDegraded(ctx, sc.results[i].Decision)
			break
		}
	}
	s.writeAuth(ctx, st, sc, denyStatus)
	s.metrics.latency(endpointAuth, start)
	s.holdAuth(sc.results)
}

// authArgs reads the query of /auth under -auth-headers nginx, whose
// configuration writes it: deny_status (401, 403 or 429) replaces status.
// Any other name, or deny_status twice, is a mistake in that configuration.
func authArgs(args *fasthttp.Args, status int) (int, error) {
	given := false
	for k, v := range args.All() {
		switch {
		case string(k) != "deny_status":
			return 0, unknown(k, "a parameter of /auth", authParams)
		case given:
			return 0, &rl.FieldError{Field: "deny_status", Rule: "must be given once"}
		}
		given = true
		var ok bool
		if status, ok = denyStatusOf(v); !ok {
			return 0, &rl.FieldError{Field: "deny_status", Rule: "must be 401, 403 or 429"}
		}
	}
	return status, nil
}

// writeAuth answers /auth from sc.results: the RateLimit headers with one
// item per matched policy, and on a denial Retry-After and a body naming
// the first policy that denied, never the key.
//
// Only Caddy and Traefik get that body: they pass a denial on to the
// client as it is. An allowed answer has none, and nor has any answer to
// nginx: nginx's auth_request reads the status and the headers only, and
// Caddy's forward_auth only the headers of an allowed answer, and each
// keeps its connection to the sidecar only when there is no body to skip.
func (s *Server) writeAuth(ctx *fasthttp.RequestCtx, st *policyState, sc *authScratch, denyStatus int) {
	rh := &ctx.Response.Header
	rh.DisableNormalizing()
	var denied *policy.Result
	var retry int64
	never := false // a denying rule that no wait can pass
	b := sc.hdr[:0]
	for i := range sc.results {
		r := &sc.results[i]
		if r.Rule.Unlimited || r.KeyRefused() {
			continue
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = headers.AppendPolicyItem(b, r.Rule.Name, r.Request.Limit, r.Rule.Scale)
	}
	if len(b) > 0 {
		rh.SetBytesV(headers.Policy, b)
	}
	b = b[:0]
	for i := range sc.results {
		r := &sc.results[i]
		res := checkmetric.Allowed
		if r.Denies() {
			res = checkmetric.Denied
			if denied == nil {
				denied = r
			}
			if !r.KeyRefused() && headers.Retryable(r.Request, r.Decision) {
				retry = max(retry, millis.Ceil(r.Decision.RetryAfter))
			} else {
				never = true
			}
		}
		s.countPolicy(st, r.Rule, res)
		s.metrics.check(endpointAuth, r.Rule.Algo, res)
		s.dash.observe("", r.Rule.Name, res == checkmetric.Denied)
		if r.Rule.Unlimited || r.KeyRefused() {
			continue
		}
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = headers.AppendRateLimitItem(b, r.Rule.Name, r.Decision)
	}
	if len(b) > 0 {
		rh.SetBytesV(headers.RateLimit, b)
	}
	sc.hdr = b
	if denied == nil {
		return
	}
	ctx.SetStatusCode(denyStatus)
	b = sc.body[:0]
	if !never {
		b = strconv.AppendInt(b, max(1, (retry+999)/1000), 10)
		rh.SetBytesV(headers.RetryAfter, b)
	}
	if s.cfg.AuthHeaders == policy.GatewayNginx {
		sc.body = b
		return
	}
	b = append(b[:0], `{"allowed":false,"policy":`...)
	b = appendString(b, denied.Rule.Name)
	switch {
	case denied.MissingKey:
		// The request lacks the policy's key (missing_key: deny): no
		// wait lets it pass.
		b = append(b, `,"missing_key":true`...)
	case denied.BadKey != policy.KeyFine:
		// The key it sent cannot be counted (sent twice, a list, too
		// long): no wait lets it pass either.
		b = append(b, `,"bad_key":"`...)
		b = append(b, denied.BadKey.String()...)
		b = append(b, '"')
	default:
		b = append(b, `,"retry_after_ms":`...)
		b = strconv.AppendInt(b, retry, 10)
	}
	b = append(b, '}')
	sc.body = b
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

// peerAddr is the TCP peer's address.
func peerAddr(ctx *fasthttp.RequestCtx) netip.Addr {
	if ip, ok := tcpIP(ctx.RemoteAddr()); ok {
		return ip
	}
	return netip.IPv6Loopback() // a unix socket or an in-memory listener: this host
}

// appendPolicyFields adds to a decision's JSON object (dst ends with its
// closing brace) the policy that decided it: "policy", "scale" and "algo",
// and its slices (algo slices) or queue (algo leaky), so a caller that
// checks by name learns the whole limit its headers describe.
func appendPolicyFields(dst []byte, p *policy.Policy) []byte {
	dst = dst[:len(dst)-1]
	dst = append(dst, `,"policy":`...)
	dst = appendString(dst, p.Name)
	dst = append(dst, `,"scale":`...)
	dst = strconv.AppendInt(dst, p.Scale, 10)
	dst = append(dst, `,"algo":"`...)
	dst = append(dst, p.Algo.String()...)
	dst = append(dst, '"')
	switch p.Algo {
	case rl.Slices:
		dst = append(dst, `,"slices":`...)
		dst = strconv.AppendInt(dst, cmp.Or(p.Slices, check.DefaultSlices), 10)
	case rl.Leaky:
		dst = append(dst, `,"queue":`...)
		dst = strconv.AppendInt(dst, p.Queue, 10)
	}
	return append(dst, '}')
}
