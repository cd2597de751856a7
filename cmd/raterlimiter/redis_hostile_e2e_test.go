package main

import (
	"encoding/base64"
	bin "encoding/binary"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/testkit/redistest"
)

// redisCLI runs redis-cli against rs and returns its output, failing t on
// an error.
func redisCLI(t *testing.T, rs *redistest.Server, args ...string) string {
	t.Helper()
	out, err := rs.CLI(args...)
	require.NoError(t, err, out)
	return strings.TrimSpace(out)
}

// redisKeyTag is the prefix of every key of id, as the Redis backend names
// them with its default prefix.
func redisKeyTag(id string) string {
	return "rl:{" + base64.RawURLEncoding.EncodeToString([]byte(id)) + "}:"
}

// metricLine returns the value of the series named exactly series on
// /metrics, or "" when it is absent.
func metricLine(t *testing.T, s *sidecar, series string) string {
	t.Helper()
	m := s.get(t, "/metrics")
	require.Equal(t, 200, m.status)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`)
	if v := re.FindStringSubmatch(m.body); v != nil {
		return v[1]
	}
	return ""
}

// refusal is one way a Redis comes to refuse writes while it still answers
// reads, with the way back.
type refusal struct {
	name   string // as raterlimiter_redis_circuit_transitions_total's reason
	cause  func(t *testing.T, rs *redistest.Server)
	remedy func(t *testing.T, rs *redistest.Server)
}

var refusals = []refusal{
	{
		// Full: maxmemory below what Redis already uses, and no key it may
		// evict. Every write that may grow memory answers OOM.
		name: "oom",
		cause: func(t *testing.T, rs *redistest.Server) {
			redisCLI(t, rs, "CONFIG", "SET", "maxmemory-policy", "noeviction")
			require.Equal(t, "OK", redisCLI(t, rs, "CONFIG", "SET", "maxmemory", "1"))
			out, _ := rs.CLI("SET", "probe-from-the-test", "x")
			require.Contains(t, out, "OOM", "Redis refuses writes now")
		},
		remedy: func(t *testing.T, rs *redistest.Server) {
			require.Equal(t, "OK", redisCLI(t, rs, "CONFIG", "SET", "maxmemory", "0"))
		},
	},
	{
		// A failed RDB save with stop-writes-on-bgsave-error (the default):
		// a save point is set, and the save cannot rename its file into
		// place (a directory holds the name; dir and dbfilename are
		// protected from CONFIG SET). Every write answers MISCONF.
		name: "misconf",
		cause: func(t *testing.T, rs *redistest.Server) {
			lines := strings.Split(redisCLI(t, rs, "CONFIG", "GET", "dir"), "\n")
			require.Len(t, lines, 2)
			dir := strings.TrimSpace(lines[1])
			file := strings.TrimSpace(strings.Split(redisCLI(t, rs, "CONFIG", "GET", "dbfilename"), "\n")[1])
			require.NoError(t, os.Mkdir(filepath.Join(dir, file), 0o755))
			require.Equal(t, "OK", redisCLI(t, rs, "CONFIG", "SET", "stop-writes-on-bgsave-error", "yes"))
			require.Equal(t, "OK", redisCLI(t, rs, "CONFIG", "SET", "save", "3600 1"))
			require.Contains(t, redisCLI(t, rs, "BGSAVE"), "started")
			deadline := time.Now().Add(20 * time.Second)
			for {
				info := redisCLI(t, rs, "INFO", "persistence")
				if strings.Contains(info, "rdb_bgsave_in_progress:0") && strings.Contains(info, "rdb_last_bgsave_status:err") {
					break
				}
				require.True(t, time.Now().Before(deadline), "the save did not fail: %s", info)
				time.Sleep(20 * time.Millisecond)
			}
			out, _ := rs.CLI("SET", "probe-from-the-test", "x")
			require.Contains(t, out, "MISCONF", "Redis refuses writes now")
		},
		remedy: func(t *testing.T, rs *redistest.Server) {
			// Without a save point a failed save stops no writes.
			require.Equal(t, "OK", redisCLI(t, rs, "CONFIG", "SET", "save", ""))
		},
	},
}

// TestE2ERedisRefusingWrites runs the sidecar with each -redis-fail mode on
// a Redis that comes to refuse writes while it still answers reads (OOM at
// maxmemory with noeviction, MISCONF after a failed save): that Redis cannot
// count a check, so it is unavailable. /healthz says so before any check
// has failed, raterlimiter_redis_up is 0, and every check is answered by
// the fail mode: closed 503, open allowed, local by the sidecar's own
// counters; never a 500. A check that only reads (a peek, which Redis would
// answer) is answered by the fail mode as well and does not close the
// circuit while writes are refused. Once Redis accepts
// writes again, the sidecar says ok and counts on Redis again.
func TestE2ERedisRefusingWrites(t *testing.T) {
	redistest.Available(t)
	for _, rf := range refusals {
		t.Run(rf.name, func(t *testing.T) {
			rs := redistest.Start(t)
			modes := []string{"closed", "open", "local"}
			sidecars := map[string]*sidecar{}
			for _, mode := range modes {
				sidecars[mode] = start(t, nil, "-backend", "redis", "-redis-url", rs.URL(), "-redis-fail", mode)
			}
			for _, mode := range modes {
				s := sidecars[mode]
				r := s.get(t, "/check_rate?id=before-"+mode+"&scale=60000&limit=2")
				require.Equal(t, 200, r.status, r.body)
				require.Equal(t, "ok", s.get(t, "/healthz").body)
				require.Equal(t, "1", metricLine(t, s, "raterlimiter_redis_up"))
			}

			rf.cause(t, rs)

			for _, mode := range modes {
				t.Run(mode, func(t *testing.T) {
					s := sidecars[mode]
					// /healthz first: no check has failed yet.
					h := s.get(t, "/healthz")
					if mode == "closed" {
						assert.Equal(t, 503, h.status, "a Redis that refuses writes cannot answer checks: %s", h.body)
					} else {
						assert.Equal(t, 200, h.status, h.body)
						assert.Equal(t, "degraded: "+mode, h.body)
					}
					assert.Equal(t, "0", metricLine(t, s, "raterlimiter_redis_up"))
					assert.Equal(t, "1", metricLine(t, s, `raterlimiter_redis_circuit_transitions_total{reason="`+rf.name+`",state="open"}`))

					for _, algo := range []string{"fixed", "sliding", "slices"} {
						id := rf.name + "-" + mode + "-" + algo
						for i := range 3 {
							r := s.get(t, "/check_rate?id="+id+"&scale=60000&limit=2&algo="+algo)
							switch mode {
							case "closed":
								assert.Equal(t, 503, r.status, "%s check %d: %s", algo, i, r.body)
							case "open":
								assert.Equal(t, 200, r.status, "%s check %d: %s", algo, i, r.body)
								assert.Equal(t, "open", r.header.Get("X-RateLimit-Degraded"))
							case "local":
								assert.Equal(t, []int{200, 200, 429}[i], r.status, "%s check %d, on this sidecar's counters: %s", algo, i, r.body)
								assert.Equal(t, "local", r.header.Get("X-RateLimit-Degraded"))
							}
						}
					}
					r := s.do(t, "POST", "/check_rates", "application/json", `[{"id":"batch-`+mode+`","scale":60000,"limit":2}]`)
					if mode == "closed" {
						assert.Equal(t, 503, r.status, r.body)
					} else {
						assert.Equal(t, 200, r.status, r.body)
						assert.Equal(t, mode, r.header.Get("X-RateLimit-Degraded"))
					}

					// Peeks read only, which Redis would answer: those that
					// probe the circuit (one per 100 ms) probe with a write
					// instead, so they are answered by the fail mode too and
					// never close the circuit while writes are refused.
					for i := range 4 {
						time.Sleep(150 * time.Millisecond)
						p := s.get(t, "/check_rate?id=before-"+mode+"&scale=60000&limit=2&hits=0")
						if mode == "closed" {
							assert.Equal(t, 503, p.status, "peek %d: %s", i, p.body)
						} else {
							assert.Equal(t, 200, p.status, "peek %d: %s", i, p.body)
							assert.Equal(t, mode, p.header.Get("X-RateLimit-Degraded"), "peek %d", i)
						}
					}
					assert.Equal(t, "0", metricLine(t, s, "raterlimiter_redis_up"), "still refusing writes")
					assert.Equal(t, "", metricLine(t, s, `raterlimiter_redis_circuit_transitions_total{reason="answered",state="closed"}`),
						"a read that succeeds does not close a circuit opened for refused writes")
				})
			}

			rf.remedy(t, rs)

			for _, mode := range modes {
				s := sidecars[mode]
				deadline := time.Now().Add(10 * time.Second)
				for s.get(t, "/healthz").body != "ok" {
					require.True(t, time.Now().Before(deadline), "%s: /healthz never said ok again", mode)
					time.Sleep(50 * time.Millisecond)
				}
				assert.Equal(t, "1", metricLine(t, s, "raterlimiter_redis_up"), mode)
				r := s.get(t, "/check_rate?id=after-"+mode+"&scale=60000&limit=2")
				assert.Equal(t, 200, r.status, r.body)
				assert.Empty(t, r.header.Get("X-RateLimit-Degraded"), "%s: counted on Redis again", mode)
				require.NoError(t, s.stop(t))
			}
		})
	}
}

// TestE2ERedisPlantedCounters plants in Redis counters no check writes
// (-2^63, as a fixed window's counter and as a sliding window's count) and
// checks those ids: never an answer whose remaining is below zero or above
// the limit, nor a count below zero. The fixed window's counter is a clean
// 500, whatever -redis-fail says (Redis answered; what it holds is wrong);
// the sliding window reads a count below one as none. Other ids are served
// as before.
func TestE2ERedisPlantedCounters(t *testing.T) {
	redistest.Available(t)
	rs := redistest.Start(t)
	const scale = 3_600_000
	now := time.Now().UnixMilli()
	w := now / scale
	for _, k := range []int64{w, w + 1} { // the check may fall in the next window
		redisCLI(t, rs, "SET", redisKeyTag("planted-fixed")+"f:"+strconv.Itoa(scale)+":"+strconv.FormatInt(k, 10), "-9223372036854775808")
	}
	// A sliding window's record: count, modified, created of the current
	// window, then of the previous one, as little-endian doubles.
	rec := make([]byte, 0, 48)
	for _, x := range []float64{-9223372036854775808, float64(now), float64(now), 0, 0, 0} {
		rec = bin.LittleEndian.AppendUint64(rec, math.Float64bits(x))
	}
	_, err := rs.Do("SET", redisKeyTag("planted-sliding")+"w:"+strconv.Itoa(scale), string(rec))
	require.NoError(t, err)

	for _, mode := range []string{"closed", "open"} {
		t.Run(mode, func(t *testing.T) {
			s := start(t, nil, "-backend", "redis", "-redis-url", rs.URL(), "-redis-fail", mode, "-redis-deny-cache", "-1")
			for _, c := range []struct{ id, algo string }{{"planted-fixed", "fixed"}, {"planted-sliding", "sliding"}} {
				for i := range 3 {
					r := s.get(t, "/check_rate?id="+c.id+"&scale="+strconv.Itoa(scale)+"&limit=5&algo="+c.algo)
					if r.status == 200 || r.status == 429 {
						b := decode[body](t, r.body)
						assert.True(t, b.Remaining >= 0 && b.Remaining <= 5 && b.Count >= 0, "%s check %d: %s", c.algo, i, r.body)
						assert.NotEqual(t, "fixed", c.algo, "a fixed window's counter below zero is an error: %s", r.body)
						continue // the sliding window reads a count below one as none
					}
					assert.Equal(t, 500, r.status, "%s check %d: a counter no check writes is an error: %s", c.algo, i, r.body)
					assert.Equal(t, `{"error":"api: internal error"}`, strings.TrimSpace(r.body))
				}
			}
			r := s.get(t, "/check_rate?id=clean-"+mode+"&scale=60000&limit=5")
			assert.Equal(t, 200, r.status, r.body)
			assert.Equal(t, int64(4), decode[body](t, r.body).Remaining)
			assert.Equal(t, "1", metricLine(t, s, "raterlimiter_redis_up"), "Redis answered: it is up")
			require.NoError(t, s.stop(t))
		})
	}
}

// TestE2ERedisMaxScale: on Redis a record lives as long as its scale, so a
// caller naming the longest scale (ten years) and 600 slices under fresh ids
// would plant 2.4 KB an id for ten years. -redis-max-scale (a day by
// default) bounds the scale a check that names its own may choose: longer
// is a 400 naming the flag, in a query, a JSON body and a batch, and Redis
// holds nothing of it. A scale within the bound is served, its record
// expiring with it; a policy's scale is the operator's and is not bound;
// the flag raises the bound, and is refused where it would do nothing.
func TestE2ERedisMaxScale(t *testing.T) {
	redistest.Available(t)
	rs := redistest.Start(t)
	pol := filepath.Join(t.TempDir(), "policies.yaml")
	require.NoError(t, os.WriteFile(pol, []byte("policies:\n  - name: monthly\n    key: header:X-Api-Key\n    limit: 1000\n    scale: 720h\n"), 0o644))
	s := start(t, nil, "-backend", "redis", "-redis-url", rs.URL(), "-policies", pol)

	const tenYears = "315360000000"
	long := "/check_rate?id=far&scale=" + tenYears + "&limit=5&algo=slices&slices=600"
	for _, r := range []reply{
		s.get(t, long),
		s.do(t, "POST", "/check_rate", "application/json", `{"id":"far","scale":`+tenYears+`,"limit":5,"algo":"slices","slices":600}`),
		s.do(t, "POST", "/check_rate", "application/x-www-form-urlencoded", "id=far&scale=86400001&limit=5"),
		s.do(t, "POST", "/check_rates", "application/json", `[{"id":"far","scale":1000,"limit":5},{"id":"far","scale":`+tenYears+`,"limit":5}]`),
	} {
		assert.Equal(t, 400, r.status, r.body)
		e := decode[errBody](t, r.body)
		assert.Equal(t, "scale", e.Field, r.body)
		assert.Contains(t, e.Rule, "-redis-max-scale", r.body)
		assert.Contains(t, e.Rule, "86400000", r.body)
	}
	keys := redisCLI(t, rs, "KEYS", redisKeyTag("far")+"*")
	assert.Empty(t, keys, "Redis holds nothing of the refused checks (nor of the batch's first)")

	r := s.get(t, "/check_rate?id=day&scale=86400000&limit=5&algo=slices&slices=600")
	require.Equal(t, 200, r.status, "a day is within the bound: %s", r.body)
	pttl, err := strconv.ParseInt(redisCLI(t, rs, "PTTL", redisKeyTag("day")+"n:86400000:600"), 10, 64)
	require.NoError(t, err)
	assert.True(t, pttl > 0 && pttl <= 86_400_000+2_000, "the record lives no longer than its scale (and a slack): %d ms", pttl)

	r = s.do(t, "GET", "/check_rate?policy=monthly&id=k1", "", "")
	assert.Equal(t, 200, r.status, "a policy's scale is the operator's: %s", r.body)
	require.NoError(t, s.stop(t))

	wide := start(t, nil, "-backend", "redis", "-redis-url", rs.URL(), "-redis-max-scale", "87600h")
	r = wide.get(t, long)
	assert.Equal(t, 200, r.status, "the operator raised the bound: %s", r.body)
	require.NoError(t, wide.stop(t))

	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-redis-max-scale", "1h"}, "-redis-max-scale applies only to -backend redis"},
		{[]string{"-backend", "redis", "-redis-url", rs.URL(), "-redis-max-scale", "500us"}, "-redis-max-scale must be from 1ms to 87600h"},
		{[]string{"-backend", "redis", "-redis-url", rs.URL(), "-redis-max-scale", "-1s"}, "-redis-max-scale must not be negative"},
		{[]string{"-backend", "redis", "-redis-url", rs.URL(), "-redis-max-scale", "87601h"}, "-redis-max-scale must be from 1ms to 87600h"},
	} {
		code, _, stderr := runBinary(t, nil, tt.args...)
		assert.Equal(t, 2, code, stderr)
		assert.Contains(t, stderr, tt.msg)
	}
}
