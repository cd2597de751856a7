package rls

// What a client of Envoy can put into a request must never make the
// service answer an error: Envoy's default (failure_mode_deny: false) lets
// a request through unlimited when the service errs. A client controls the
// values of descriptors built from its headers, its path or its address,
// and, where a route takes hits_addend from the request, the hits.

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/wrapperspb"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
	"github.com/raterlimiter/raterlimiter/limitertest"
	"github.com/raterlimiter/raterlimiter/memory"
)

// idRecorder is a limiter that remembers the ids it was asked about.
type idRecorder struct {
	rl.Limiter
	mu  sync.Mutex
	ids []string
}

func (r *idRecorder) CheckRate(ctx context.Context, req rl.Request) (rl.Decision, error) {
	r.mu.Lock()
	r.ids = append(r.ids, req.ID)
	r.mu.Unlock()
	return r.Limiter.CheckRate(ctx, req)
}

func (r *idRecorder) CheckRates(ctx context.Context, reqs []rl.Request) ([]rl.Decision, error) {
	r.mu.Lock()
	for _, q := range reqs {
		r.ids = append(r.ids, q.ID)
	}
	r.mu.Unlock()
	return r.Limiter.CheckRates(ctx, reqs)
}

func (r *idRecorder) last(t *testing.T) string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.NotEmpty(t, r.ids)
	return r.ids[len(r.ids)-1]
}

const failOpenConfig = `domain: d
descriptors:
  - key: header
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: big
    rate_limit: {unit: minute, requests_per_unit: 4294967295}
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: minute, requests_per_unit: 2}
`

func newFailOpenServer(t testing.TB, maxKey int) (*Server, *idRecorder) {
	t.Helper()
	clock := limitertest.NewClock(limitertest.T0)
	lim := memory.New(memory.Config{Clock: clock.Now, SweepInterval: -1, MaxIDBytes: maxKey + policy.IDOverhead})
	t.Cleanup(func() { lim.Close() })
	c, err := Parse("d.yaml", []byte(failOpenConfig))
	require.NoError(t, err)
	rec := &idRecorder{Limiter: lim}
	return New(Options{Limiter: rec, Config: c, MaxKeyBytes: maxKey}), rec
}

func askOne(t *testing.T, s *Server, d *ratelimitv3.RateLimitDescriptor) *rlspb.RateLimitResponse {
	t.Helper()
	resp, err := s.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}})
	require.NoError(t, err, "a client's input never becomes an error")
	require.Len(t, resp.Statuses, 1)
	return resp
}

// TestLongValuesAreCounted: a value longer than -max-id-bytes (a client's
// 2,000-byte header, Envoy's whole 60 KiB of headers) is counted, as the
// peer counts it, under a digest of fixed size: the same value shares one
// counter, two values have two, and the id the limiter keeps stays within
// its bound.
func TestLongValuesAreCounted(t *testing.T) {
	for _, n := range []int{1025, 2000, 60 << 10} {
		s, rec := newFailOpenServer(t, check.DefaultMaxIDBytes)
		v := strings.Repeat("x", n)
		for i, want := range []rlspb.RateLimitResponse_Code{rlspb.RateLimitResponse_OK, rlspb.RateLimitResponse_OK, rlspb.RateLimitResponse_OVER_LIMIT} {
			resp := askOne(t, s, entries("header", v))
			assert.Equal(t, want, resp.OverallCode, "%d bytes, call %d", n, i)
		}
		id := rec.last(t)
		assert.LessOrEqual(t, len(id), check.DefaultMaxIDBytes+policy.IDOverhead)
		assert.Less(t, len(id), 200, "the digest, not the value")

		// One byte more is another client: its own counter.
		resp := askOne(t, s, entries("header", v+"y"))
		assert.Equal(t, rlspb.RateLimitResponse_OK, resp.OverallCode)
		assert.Equal(t, uint32(1), resp.Statuses[0].LimitRemaining)
		assert.NotEqual(t, id, rec.last(t))
	}
}

// TestLongDescriptorNeverSharesAShortOnesCounter: the digest's id cannot be
// the id of a descriptor that fits (a fitting key starts with its first
// entry's key length, never 0), even one whose value is the digest's bytes.
func TestLongDescriptorNeverSharesAShortOnesCounter(t *testing.T) {
	s, rec := newFailOpenServer(t, check.DefaultMaxIDBytes)
	askOne(t, s, entries("header", strings.Repeat("z", 5000)))
	long := rec.last(t)
	key := long[strings.IndexByte(long[1:], 0)+2:] // after CounterID's NUL, name, NUL
	require.Equal(t, byte(0), key[0])
	askOne(t, s, entries("header", key))
	assert.NotEqual(t, long, rec.last(t))
	// And a descriptor of several entries that together pass the bound is
	// counted the same way.
	for i := range 3 {
		resp := askOne(t, s, entries("a", strings.Repeat("a", 600), "b", strings.Repeat("b", 600)))
		assert.Equal(t, i == 2, resp.OverallCode == rlspb.RateLimitResponse_OVER_LIMIT, "call %d", i)
	}
}

// TestSmallMaxIDBytesStillCounts: with -max-id-bytes under the digest's
// size, the digest is cut to fit, and long values are still counted.
func TestSmallMaxIDBytesStillCounts(t *testing.T) {
	for _, maxKey := range []int{1, 8, 32, 33} {
		s, rec := newFailOpenServer(t, maxKey)
		resp := askOne(t, s, entries("header", strings.Repeat("v", 100)))
		assert.Equal(t, rlspb.RateLimitResponse_OK, resp.OverallCode, "max %d", maxKey)
		assert.LessOrEqual(t, len(rec.last(t)), maxKey+policy.IDOverhead)
	}
}

// TestHugeHitsAddendIsOverLimit: a descriptor's hits_addend of 2^32 or
// more is OVER_LIMIT, as the peer answers it (it adds the hits to its
// counter, which then exceeds any limit), and the window stays spent.
func TestHugeHitsAddendIsOverLimit(t *testing.T) {
	for _, hits := range []uint64{1 << 32, 1<<32 + 1, 1 << 63, math.MaxUint64} {
		s, _ := newFailOpenServer(t, check.DefaultMaxIDBytes)
		for _, key := range []string{"header", "big"} {
			d := entries(key, "v")
			d.HitsAddend = wrapperspb.UInt64(hits)
			resp := askOne(t, s, d)
			assert.Equal(t, rlspb.RateLimitResponse_OVER_LIMIT, resp.OverallCode, "%s, hits %d", key, hits)
			assert.Equal(t, rlspb.RateLimitResponse_OVER_LIMIT, resp.Statuses[0].Code)
			assert.Zero(t, resp.Statuses[0].LimitRemaining)
			resp = askOne(t, s, entries(key, "v"))
			assert.Equal(t, rlspb.RateLimitResponse_OVER_LIMIT, resp.OverallCode, "%s: the window is spent", key)
		}
	}
	// 2^32 - 1 is a count like any other.
	s, _ := newFailOpenServer(t, check.DefaultMaxIDBytes)
	d := entries("big", "w")
	d.HitsAddend = wrapperspb.UInt64(math.MaxUint32)
	resp := askOne(t, s, d)
	assert.Equal(t, rlspb.RateLimitResponse_OK, resp.OverallCode)
	assert.Zero(t, resp.Statuses[0].LimitRemaining)
}

// FuzzClientInput: whatever values and hits a client makes Envoy send on
// a well-formed route (a domain, keys, 1 to 8 descriptors), the answer is
// one status per descriptor, never an error.
func FuzzClientInput(f *testing.F) {
	f.Add("v", "w", uint64(1), uint16(10), uint8(1))
	f.Add("", "", uint64(0), uint16(3000), uint8(8))
	f.Add("x", "\x00", uint64(1<<40), uint16(60000), uint8(3))
	s, _ := newFailOpenServer(f, check.DefaultMaxIDBytes)
	f.Fuzz(func(t *testing.T, v1, v2 string, hits uint64, grow uint16, n uint8) {
		long := strings.Repeat(v1+"#", int(grow)%(64<<10)/max(len(v1)+1, 1))
		var ds []*ratelimitv3.RateLimitDescriptor
		for i := range int(n%8) + 1 {
			var d *ratelimitv3.RateLimitDescriptor
			switch i % 4 {
			case 0:
				d = entries("header", long)
			case 1:
				d = entries("a", v1, "b", v2)
			case 2:
				d = entries("big", v2+long)
			default:
				d = entries("unknown", v1)
			}
			if i%3 == 1 {
				d.HitsAddend = wrapperspb.UInt64(hits)
			}
			ds = append(ds, d)
		}
		resp, err := s.ShouldRateLimit(context.Background(), &rlspb.RateLimitRequest{Domain: "d", Descriptors: ds, HitsAddend: uint32(hits)})
		if err != nil {
			t.Fatalf("a client's input became an error: %v", err)
		}
		if len(resp.Statuses) != len(ds) {
			t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(ds))
		}
	})
}
