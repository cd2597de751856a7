package api

import (
	"bytes"
	"errors"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/headers"
	"github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/checkmetric"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

func (s *Server) checkRate(ctx *fasthttp.RequestCtx) {
	start := startTime(ctx)
	var r rl.Request
	var shown string // the id as the caller gave it
	var err error
	var opts checkOpts
	pc := s.policyCheck()
	var pol *policy.Policy
	if ctx.IsGet() {
		pol, err = parseArgs(ctx.QueryArgs(), &r, &shown, s.cfg.MaxIDBytes, s.rules, &pc, &opts)
	} else {
		pol, err = s.parseBody(ctx, &r, &shown, &pc, &opts)
	}
	if err == nil && pol == nil {
		err = s.checkScale(r.Scale)
	}
	if err != nil {
		s.metrics.check(endpointCheck, r.Algo, checkmetric.Invalid)
		s.invalid(ctx, err)
		return
	}
	if opts.wait {
		// The delay is bounded by MaxWait, or by the caller's own
		// max_delay_ms when smaller.
		if most := millis.Duration(s.engine.MaxWaitMS); r.MaxDelay <= 0 || r.MaxDelay > most {
			r.MaxDelay = most
		}
		if client := s.clientAddr(ctx, pc.st); s.takeHold(client) {
			defer s.holds.give(client) // after hold
		} else {
			// No place to be held (wait.go): not a wait at all.
			r.MaxDelay, opts.wait = millis.Duration(noWaitMS), false
		}
	}
	d, err := s.cfg.Limiter.CheckRate(s.deadlines.get(start), r)
	if err != nil {
		res := s.limiterFailed(ctx, err)
		s.metrics.check(endpointCheck, r.Algo, res)
		if pol != nil {
			s.countPolicy(pc.st, &pol.Rule, res)
		}
		return
	}
	markDegraded(ctx, d)
	sc := s.scratch.Get().(*scratch)
	name := headers.PolicyName
	if pol != nil {
		name = pol.Name
	}
	sc.b = setRateHeaders(&ctx.Response.Header, &sc.policies, sc.b, name, r, d)
	sc.b = appendDecision(sc.b[:0], shown, d)
	if pol != nil {
		sc.b = appendPolicyFields(sc.b, pol)
	}
	ctx.SetContentType("application/json")
	res := checkmetric.Allowed
	if !d.Allowed {
		res = checkmetric.Denied
		ctx.SetStatusCode(fasthttp.StatusTooManyRequests)
	}
	s.metrics.check(endpointCheck, r.Algo, res)
	if pol != nil {
		s.countPolicy(pc.st, &pol.Rule, res)
	}
	s.dash.observe(shown, name, res == checkmetric.Denied)
	ctx.SetBody(sc.b)
	s.scratch.Put(sc)
	s.metrics.latency(endpointCheck, start)
	if opts.wait {
		s.hold(d)
	}
}

// parseBody reads a POSTed check: JSON when the content type says so or the
// body starts with '{' and no content type is given; a form otherwise.
func (s *Server) parseBody(ctx *fasthttp.RequestCtx, r *rl.Request, shown *string, pc *policyCheck, opts *checkOpts) (*policy.Policy, error) {
	if err := noQuery(ctx, "/check_rate"); err != nil {
		return nil, err
	}
	ct := ctx.Request.Header.ContentType()
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = bytes.TrimSpace(ct)
	body := ctx.PostBody()
	isJSON := false
	switch {
	case len(ct) == 0:
		isJSON = bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{"))
	case bytes.EqualFold(ct, []byte("application/json")):
		isJSON = true
	case bytes.EqualFold(ct, []byte("application/x-www-form-urlencoded")):
	default:
		return nil, &rl.FieldError{Field: "body", Rule: "must be application/json or application/x-www-form-urlencoded"}
	}
	if !isJSON {
		args := fasthttp.AcquireArgs()
		defer fasthttp.ReleaseArgs(args)
		args.ParseBytes(body)
		return parseArgs(args, r, shown, s.cfg.MaxIDBytes, s.rules, pc, opts)
	}
	var idbuf [128]byte
	jr := s.readers.Get().(*jsonReader)
	defer func() {
		jr.release()
		s.readers.Put(jr)
	}()
	err := jr.reset(body)
	var ids []byte
	var pol *policy.Policy
	if err == nil {
		ids, pol, err = jr.check(r, idbuf[:0], s.cfg.MaxIDBytes, s.rules, pc, opts)
	}
	if err == nil {
		err = jr.end()
	}
	if err != nil {
		return nil, err
	}
	return pol, setID(r, shown, ids, pol, s.cfg.MaxIDBytes)
}

// noQuery refuses a query on a POST to path, whose check is its body: a
// parameter there would not be read.
func noQuery(ctx *fasthttp.RequestCtx, path string) error {
	if len(ctx.URI().QueryString()) == 0 {
		return nil
	}
	for k := range ctx.QueryArgs().All() {
		return &rl.FieldError{Field: shownName(k), Rule: "is in the query of a POST " + path + ", which reads its checks from the body alone"}
	}
	return nil
}

// batch is the reusable state of one POST /check_rates.
type batch struct {
	reqs []rl.Request
	pols []*policy.Policy // each item's policy, nil for an explicit check
	ends []int            // the end of each item's id in ids
	ids  []byte
	out  []byte
	json jsonReader
}

func (s *Server) checkRates(ctx *fasthttp.RequestCtx) {
	start := startTime(ctx)
	b := s.batches.Get().(*batch)
	defer func() {
		if cap(b.ids) <= 1<<20 && cap(b.out) <= 1<<20 {
			clear(b.reqs) // drop the ids' string
			s.batches.Put(b)
		}
	}()
	b.reqs, b.pols, b.ends, b.ids = b.reqs[:0], b.pols[:0], b.ends[:0], b.ids[:0]
	pc := s.policyCheck()
	err := noQuery(ctx, "/check_rates")
	if err == nil {
		err = s.parseBatch(ctx.PostBody(), b, &pc)
	}
	b.json.release()
	if err != nil {
		var te tooLarge
		if errors.As(err, &te) {
			s.fail(ctx, fasthttp.StatusRequestEntityTooLarge, err.Error())
			return
		}
		s.metrics.check(endpointBatch, rl.Fixed, checkmetric.Invalid)
		s.invalid(ctx, err)
		return
	}
	// One string holds every id; each request's ID is a piece of it, or
	// for a check by policy the policy's counter id of it.
	all := string(b.ids)
	from := 0
	anyPolicy := false
	for i := range b.reqs {
		b.reqs[i].ID = all[from:b.ends[i]]
		if p := b.pols[i]; p != nil {
			b.reqs[i].ID = counterID(p, b.ids[from:b.ends[i]])
			anyPolicy = true
		}
		from = b.ends[i]
	}
	maxID := s.cfg.MaxIDBytes
	if anyPolicy {
		maxID += policy.IDOverhead // explicit ids were held to s.cfg.MaxIDBytes as they were read
	}
	if err := check.BatchWire(b.reqs, maxID); err != nil {
		s.metrics.check(endpointBatch, rl.Fixed, checkmetric.Invalid)
		s.invalid(ctx, err)
		return
	}
	s.metrics.batchSize.Observe(float64(len(b.reqs)))
	ds, err := s.cfg.Limiter.CheckRates(s.deadlines.get(start), b.reqs)
	if err != nil {
		res := s.limiterFailed(ctx, err)
		for i := range b.reqs {
			s.metrics.check(endpointBatch, b.reqs[i].Algo, res)
		}
		return
	}
	for _, d := range ds {
		if d.Degraded() {
			markDegraded(ctx, d)
			break
		}
	}
	if len(ds) != len(b.reqs) {
		s.cfg.Logger.Error("api: the limiter answered a batch with the wrong number of decisions", "want", len(b.reqs), "got", len(ds))
		s.fail(ctx, fasthttp.StatusInternalServerError, "api: internal error")
		return
	}
	out := append(b.out[:0], '[')
	from = 0
	for i := range ds {
		if i > 0 {
			out = append(out, ',')
		}
		id := all[from:b.ends[i]]
		out = appendDecision(out, id, ds[i])
		from = b.ends[i]
		res := checkmetric.Allowed
		if !ds[i].Allowed {
			res = checkmetric.Denied
		}
		s.metrics.check(endpointBatch, b.reqs[i].Algo, res)
		name := headers.PolicyName
		if p := b.pols[i]; p != nil {
			s.countPolicy(pc.st, &p.Rule, res)
			name = p.Name
		}
		s.dash.observe(id, name, res == checkmetric.Denied)
	}
	out = append(out, ']')
	b.out = out
	ctx.SetContentType("application/json")
	ctx.SetBody(out)
	s.metrics.latency(endpointBatch, start)
}

// checkScale returns the error of a scale longer than Config.MaxScale, for
// a check that names its own (none when MaxScale is unset).
func (s *Server) checkScale(scale time.Duration) error {
	most := s.cfg.MaxScale
	if most <= 0 || scale <= most {
		return nil
	}
	return &rl.FieldError{Field: "scale", Rule: "must be at most " + strconv.FormatInt(most.Milliseconds(), 10) +
		" (" + most.String() + "): the longest scale this sidecar lets a caller choose (-redis-max-scale)"}
}

// tooLarge is the error of a batch with more than MaxBatch items.
type tooLarge struct{ max int }

func (t tooLarge) Error() string {
	return "api: a batch may hold at most " + strconv.Itoa(t.max) + " checks"
}

func (s *Server) parseBatch(body []byte, b *batch, pc *policyCheck) error {
	r := &b.json
	if err := r.reset(body); err != nil {
		return err
	}
	if err := r.open('[', "an array of checks"); err != nil {
		return err
	}
	for r.dec.PeekKind() != ']' {
		if len(b.reqs) == s.cfg.MaxBatch {
			return tooLarge{s.cfg.MaxBatch}
		}
		b.reqs = append(b.reqs, rl.Request{})
		var err error
		var p *policy.Policy
		b.ids, p, err = r.check(&b.reqs[len(b.reqs)-1], b.ids, s.cfg.MaxIDBytes, s.rules, pc, nil)
		if err == nil && p == nil {
			err = s.checkScale(b.reqs[len(b.reqs)-1].Scale)
		}
		if err != nil {
			return &rl.ItemError{Index: len(b.reqs) - 1, Err: err}
		}
		b.pols = append(b.pols, p)
		b.ends = append(b.ends, len(b.ids))
	}
	if _, err := r.dec.ReadToken(); err != nil { // ']'
		return r.syntax(err, "")
	}
	return r.end()
}
