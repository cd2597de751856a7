package rls

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/checkmetric"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

const (
	// DefaultMaxDescriptors bounds the descriptors of one request, unless
	// Options.MaxDescriptors says otherwise.
	DefaultMaxDescriptors = 64
	// DefaultMaxEntries bounds the entries of one descriptor.
	DefaultMaxEntries = 16
	// callTimeout bounds the wait for the limiter when the call has no
	// deadline of its own.
	callTimeout = time.Second
)

// Options configures a Server. Limiter is required.
type Options struct {
	// Limiter counts; it must accept ids of MaxKeyBytes +
	// policy.IDOverhead bytes.
	Limiter rl.Limiter
	// Config is the configuration in force at start (nil: no descriptor
	// has a rule).
	Config *Config
	// Load reads the configuration again, for Reload.
	Load func() (*Config, error)
	// MaxKeyBytes bounds the counter key of a descriptor, its entries'
	// keys and values together: a longer descriptor is counted under a
	// digest of them (digestKey), never refused nor cut. Default
	// check.DefaultMaxIDBytes.
	MaxKeyBytes int
	// MaxDescriptors bounds a request's descriptors. Default
	// DefaultMaxDescriptors.
	MaxDescriptors int
	// Logger receives reloads. Default slog.Default().
	Logger *slog.Logger
	// MaxOverrideScale, when positive, is the longest window a request's
	// own limit override may name (the sidecar passes -redis-max-scale on
	// the Redis backend): a longer unit is refused with InvalidArgument.
	// Configured rules are the operator's and not bound.
	MaxOverrideScale time.Duration
	// Shadow is the global shadow mode (envoyproxy/ratelimit's
	// SHADOW_MODE): every descriptor is counted and its status reported
	// as usual, OVER_LIMIT included, but the overall code is always OK.
	Shadow bool
	// QuotaMode puts every rule in quota mode (quota_mode: true), as
	// envoyproxy/ratelimit's QUOTA_MODE=true.
	QuotaMode bool
	// ResponseMetadata adds the request and its quota-mode violations to
	// each answer's dynamic_metadata, as envoyproxy/ratelimit's
	// RESPONSE_DYNAMIC_METADATA=true (see responseMetadata).
	ResponseMetadata bool
	// ResponseHeaders adds RateLimit-Limit, RateLimit-Remaining and
	// RateLimit-Reset to each answer's response_headers_to_add, which
	// Envoy's filter writes on the response to the client, as
	// envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED=true (see
	// limitHeaders).
	ResponseHeaders bool
}

// Server is the rate limit service. It is safe for concurrent use.
type Server struct {
	rlspb.UnimplementedRateLimitServiceServer
	// opts are New's, their defaults applied; their Config is nil, not to
	// keep the first configuration alive: cfg is the one in force.
	opts   Options
	cfg    atomic.Pointer[Config]
	engine policy.Engine
	m      *metrics
}

var _ rlspb.RateLimitServiceServer = (*Server)(nil)

// New returns a Server for opts. It panics if opts.Limiter is nil.
func New(opts Options) *Server {
	if opts.Limiter == nil {
		panic("rls: Options.Limiter is nil")
	}
	if opts.MaxKeyBytes <= 0 {
		opts.MaxKeyBytes = check.DefaultMaxIDBytes
	}
	if opts.MaxDescriptors <= 0 {
		opts.MaxDescriptors = DefaultMaxDescriptors
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{opts: opts, engine: policy.Engine{Limiter: opts.Limiter, MaxKeyBytes: opts.MaxKeyBytes}, m: newMetrics()}
	s.opts.Config = nil
	s.setConfig(opts.Config)
	return s
}

// Collectors are the server's series for /metrics.
func (s *Server) Collectors() []prometheus.Collector {
	m := s.m
	return []prometheus.Collector{m.family, m.checks, m.requests, m.reloads, m.removed, m.rules, m.lastReload}
}

// setConfig puts c in force. Counters are kept by rule (domain and
// descriptor path), so the rules c keeps keep their counts.
func (s *Server) setConfig(c *Config) {
	s.cfg.Store(c)
	if c != nil {
		s.m.rules.Set(float64(len(c.rules)))
		s.m.lastReload.Set(float64(time.Now().UnixMilli()) / 1000)
	}
}

// ErrNoConfig is returned by Reload without a way to load a configuration.
var ErrNoConfig = errors.New("rls: no configuration to reload")

// Reload loads the configuration again and puts it in force. One that does
// not load leaves the one in force; the error is logged, counted and
// returned.
func (s *Server) Reload() error {
	if s.opts.Load == nil {
		return ErrNoConfig
	}
	c, err := s.opts.Load()
	if err != nil {
		s.m.reloads.WithLabelValues("failed").Inc()
		s.opts.Logger.Error("rls: configuration not reloaded: the rules in force stay", "err", err)
		return err
	}
	if gone := Removed(s.cfg.Load(), c); len(gone) > 0 {
		s.m.removed.Add(float64(len(gone)))
		s.opts.Logger.Warn("rls: the reloaded configuration removes rules: their descriptors are no longer limited by them", "removed", gone)
	}
	s.setConfig(c)
	s.m.reloads.WithLabelValues("ok").Inc()
	s.opts.Logger.Info("rls: configuration reloaded", "files", len(c.Files), "rules", len(c.rules))
	LogSkipped(s.opts.Logger, c)
	return nil
}

// LogSkipped logs, as a warning, the entries of c's directory that were
// not read, if any: a file the operator meant as configuration and named
// otherwise shows at each load.
func LogSkipped(log *slog.Logger, c *Config) {
	if len(c.Skipped) > 0 {
		log.Warn("rls: entries of the configuration directory not read", "skipped", strings.Join(c.Skipped, "; "))
	}
}

// ShouldRateLimit decides every descriptor of the request: each finds its
// rule as envoyproxy/ratelimit finds it, every rule found is counted in one
// call to the limiter, and the answer holds one status per descriptor in
// order. What a client of Envoy controls (values, hits_addend) is always
// answered; what only Envoy's configuration can send wrong (an empty
// domain or key, too many descriptors or entries, a limit override's unit)
// is refused with InvalidArgument; a limiter that cannot answer gives
// Unavailable.
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlspb.RateLimitRequest) (*rlspb.RateLimitResponse, error) {
	if err := s.validate(req); err != nil {
		s.m.requests.WithLabelValues("invalid").Inc()
		s.m.family.Inc(rl.Fixed, checkmetric.Invalid)
		return nil, err
	}
	cfg := s.cfg.Load()
	rules := make([]*Rule, 0, len(req.Descriptors))
	var buf []byte
	replaced := map[string]bool(nil)
	for _, d := range req.Descriptors {
		var r *Rule
		if d.Limit != nil {
			r = overrideRule(req.Domain, d)
		} else if cfg != nil {
			r, buf = cfg.lookup(req.Domain, d.Entries, buf)
		}
		if r != nil && len(r.Replaces) > 0 {
			if replaced == nil {
				replaced = map[string]bool{}
			}
			for _, n := range r.Replaces {
				replaced[n] = true
			}
		}
		rules = append(rules, r)
	}
	var (
		checks []policy.Check
		at     []int // the descriptor of each check
		keys   []byte
		over   []int // the checks whose hits_addend passes check.MaxHits
	)
	for i, r := range rules {
		if r == nil {
			continue
		}
		if r.LimitName != "" && replaced[r.LimitName] {
			rules[i] = nil // replaced: neither counted nor reported
			continue
		}
		if r.Unlimited {
			continue
		}
		d := req.Descriptors[i]
		start := len(keys)
		for j, e := range d.Entries {
			v := e.Value
			if r.shared != nil {
				v = r.sharedValue(j, e.Key, v) // share_threshold: one counter for the wildcard
			}
			keys = binary.AppendUvarint(keys, uint64(len(e.Key)))
			keys = append(keys, e.Key...)
			keys = binary.AppendUvarint(keys, uint64(len(v)))
			keys = append(keys, v...)
		}
		if len(keys)-start > s.opts.MaxKeyBytes {
			keys = digestKey(keys, start, s.opts.MaxKeyBytes)
		}
		hits, peek, isOver := hitsOf(req, d)
		if isOver {
			over = append(over, len(checks))
		}
		checks = append(checks, policy.Check{Rule: &r.Rule, Key: keys[start:len(keys):len(keys)], Hits: hits, Peek: peek})
		at = append(at, i)
	}
	cctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, callTimeout)
		defer cancel()
	}
	results, err := s.engine.Decide(cctx, checks, nil)
	if err != nil {
		code, result := codes.Unavailable, checkmetric.Unavailable
		if errors.Is(err, rl.ErrInvalid) {
			code, result = codes.InvalidArgument, checkmetric.Invalid
		}
		s.m.requests.WithLabelValues(code.String()).Inc()
		for j := range checks {
			s.m.family.Inc(checks[j].Rule.Algo, result)
		}
		return nil, status.Error(code, "rls: "+err.Error())
	}
	for _, j := range over {
		// More hits than any limit (2^32 - 1): over it, as the peer
		// answers, whatever the counter held.
		results[j].Decision.Allowed, results[j].Decision.Remaining = false, 0
	}
	resp := &rlspb.RateLimitResponse{OverallCode: rlspb.RateLimitResponse_OK,
		Statuses: make([]*rlspb.RateLimitResponse_DescriptorStatus, len(req.Descriptors))}
	for i, r := range rules {
		switch {
		case r == nil:
			resp.Statuses[i] = &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK}
		case r.Unlimited:
			resp.Statuses[i] = &rlspb.RateLimitResponse_DescriptorStatus{Code: rlspb.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
			s.m.check(r, "unlimited")
		}
	}
	var violations []int // quota mode's, for the metadata
	for j, res := range results {
		i := at[j]
		r := rules[i]
		st := &rlspb.RateLimitResponse_DescriptorStatus{
			Code:               rlspb.RateLimitResponse_OK,
			CurrentLimit:       r.Limit,
			LimitRemaining:     uint32(min(max(res.Decision.Remaining, 0), math.MaxUint32)),
			DurationUntilReset: &durationpb.Duration{Seconds: int64((max(res.Decision.Reset, 0) + time.Second - 1) / time.Second)},
		}
		result := "allowed"
		if !res.Decision.Allowed {
			result = "denied"
			switch {
			case r.Shadow:
				result = "shadow_denied" // reported, never enforced
			case r.Quota || s.opts.QuotaMode:
				// quota_mode, as envoyproxy/ratelimit answers it: OK,
				// the limit and nothing remaining, no reset.
				result = "quota_denied"
				st.DurationUntilReset = nil
				violations = append(violations, i)
			case s.opts.Shadow:
				// Reported as the peer does (the descriptor's status says
				// OVER_LIMIT), never enforced (the overall code stays OK).
				result = "shadow_denied"
				st.Code = rlspb.RateLimitResponse_OVER_LIMIT
			default:
				st.Code = rlspb.RateLimitResponse_OVER_LIMIT
				resp.OverallCode = rlspb.RateLimitResponse_OVER_LIMIT
			}
		}
		s.m.check(r, result)
		resp.Statuses[i] = st
	}
	if s.opts.ResponseMetadata {
		resp.DynamicMetadata = responseMetadata(req, rules, violations)
	}
	if s.opts.ResponseHeaders {
		resp.ResponseHeadersToAdd = limitHeaders(resp.Statuses, results, at)
	}
	s.m.requests.WithLabelValues(resp.OverallCode.String()).Inc()
	return resp, nil
}

// hitsOf is a descriptor's hits: its own hits_addend when set (0 checks
// without counting), else the request's, where 0 means 1. More than
// check.MaxHits (a descriptor's own, a uint64) counts check.MaxHits and
// reports over: the answer is then over the limit, as the peer's, which
// adds them all to its counter.
func hitsOf(req *rlspb.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) (hits int64, peek, over bool) {
	if d.HitsAddend != nil {
		v := d.HitsAddend.Value
		return int64(min(v, uint64(check.MaxHits))), v == 0, v > uint64(check.MaxHits)
	}
	return int64(max(1, req.HitsAddend)), false, false
}

// digestDomain starts what is hashed for a descriptor too long to be its
// own counter key: it sets these digests apart from any other use of
// SHA-256 over the same bytes.
const digestDomain = "raterlimiter rls descriptor\x00"

// digestKey replaces keys[start:], a descriptor's entries as length-
// prefixed keys and values that take more than maxKey bytes, by a NUL and
// the SHA-256 of digestDomain and those bytes (cut to maxKey-1 bytes when
// maxKey is under 33), and returns keys. Every replica computes the same
// digest, so one client's long value shares one counter on Redis; no
// fitting key starts with a NUL (its first byte is the length of a key,
// never empty), so a digest is never the key of a descriptor that fits;
// and two long descriptors share a counter only if SHA-256 collides.
func digestKey(keys []byte, start, maxKey int) []byte {
	h := sha256.New()
	h.Write([]byte(digestDomain))
	h.Write(keys[start:])
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	keys = append(keys[:start], 0)
	return append(keys, sum[:min(len(sum), maxKey-1)]...)
}

// validate refuses what no descriptor tree could answer.
func (s *Server) validate(req *rlspb.RateLimitRequest) error {
	switch {
	case req.Domain == "":
		return status.Error(codes.InvalidArgument, "rls: domain must not be empty")
	case len(req.Descriptors) == 0:
		return status.Error(codes.InvalidArgument, "rls: the request has no descriptors")
	case len(req.Descriptors) > s.opts.MaxDescriptors:
		return status.Errorf(codes.InvalidArgument, "rls: %d descriptors; at most %d", len(req.Descriptors), s.opts.MaxDescriptors)
	}
	for i, d := range req.Descriptors {
		if d == nil || len(d.Entries) == 0 {
			return status.Errorf(codes.InvalidArgument, "rls: descriptor %d has no entries", i)
		}
		if len(d.Entries) > DefaultMaxEntries {
			return status.Errorf(codes.InvalidArgument, "rls: descriptor %d has %d entries; at most %d", i, len(d.Entries), DefaultMaxEntries)
		}
		for j, e := range d.Entries {
			if e.Key == "" {
				return status.Errorf(codes.InvalidArgument, "rls: descriptor %d, entry %d: the key must not be empty", i, j)
			}
		}
		if d.Limit != nil {
			ms, ok := unitMillis[rlspb.RateLimitResponse_RateLimit_Unit(d.Limit.Unit)]
			if !ok {
				return status.Errorf(codes.InvalidArgument, "rls: descriptor %d: limit override with unit %v", i, d.Limit.Unit)
			}
			// The caller, not the operator, chose this window: it is bound
			// as a scale a caller names is (-redis-max-scale).
			if s.opts.MaxOverrideScale > 0 && ms > s.opts.MaxOverrideScale.Milliseconds() {
				return status.Errorf(codes.InvalidArgument, "rls: descriptor %d: a limit override's unit %v is longer than the longest window a caller may choose here (%v)", i, d.Limit.Unit, s.opts.MaxOverrideScale)
			}
		}
	}
	return nil
}

// overrideRule is the rule of a descriptor that carries its own limit
// (Envoy's limit override), as envoyproxy/ratelimit makes it: named after
// the descriptor's entries, so its counter is that descriptor's.
func overrideRule(domain string, d *ratelimitv3.RateLimitDescriptor) *Rule {
	var path strings.Builder
	for i, e := range d.Entries {
		if i > 0 {
			path.WriteByte('.')
		}
		path.WriteString(e.Key)
		if e.Value != "" {
			path.WriteString("_" + e.Value)
		}
	}
	unit := rlspb.RateLimitResponse_RateLimit_Unit(d.Limit.Unit)
	r := &Rule{Domain: domain, Path: "(override)",
		Limit: &rlspb.RateLimitResponse_RateLimit{RequestsPerUnit: d.Limit.RequestsPerUnit, Unit: unit}}
	r.Name = ruleName(domain, "override:"+unit.String()+":"+path.String())
	r.Algo, r.Rule.Limit, r.Scale = rl.Fixed, int64(d.Limit.RequestsPerUnit), unitMillis[unit]
	return r
}

// metrics are the service's series: by domain and rule (the descriptor
// path of the configuration, so bounded by it; values never become
// labels, detailed_metric or not).
type metrics struct {
	// family is raterlimiter_checks_total{via="rls"}: a descriptor's check
	// as the other ways in count theirs (shadow_denied and unlimited are
	// answered OK: allowed there).
	family     *checkmetric.Vec
	checks     *prometheus.CounterVec
	requests   *prometheus.CounterVec
	reloads    *prometheus.CounterVec
	removed    prometheus.Counter
	rules      prometheus.Gauge
	lastReload prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{
		family: checkmetric.New(checkmetric.ViaRLS),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raterlimiter_rls_checks_total",
			Help: "Envoy RLS descriptors decided, by domain, rule (the configuration's descriptor path) and result (allowed, denied, shadow_denied, quota_denied, unlimited).",
		}, []string{"domain", "rule", "result"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raterlimiter_rls_requests_total",
			Help: "ShouldRateLimit calls by outcome: OK, OVER_LIMIT, invalid, or the gRPC code of a failure.",
		}, []string{"code"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "raterlimiter_rls_reloads_total",
			Help: "Reloads of the RLS configuration by result (ok, failed); a failed one keeps the rules in force.",
		}, []string{"result"}),
		removed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "raterlimiter_rls_rules_removed_total",
			Help: "Rate limits of the RLS configuration that reloads took away (each named in a WARN line): their descriptors are no longer limited by them.",
		}),
		rules: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "raterlimiter_rls_rules",
			Help: "Rate limits in the RLS configuration in force.",
		}),
		lastReload: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "raterlimiter_rls_last_reload_success_timestamp_seconds",
			Help: "When the RLS configuration in force was loaded, Unix seconds.",
		}),
	}
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("failed")
	return m
}

func (m *metrics) check(r *Rule, result string) {
	m.checks.WithLabelValues(r.Domain, r.Path, result).Inc()
	if result == "denied" {
		m.family.Inc(r.Rule.Algo, checkmetric.Denied)
	} else {
		m.family.Inc(r.Rule.Algo, checkmetric.Allowed)
	}
}
