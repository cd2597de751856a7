package main

// The soak (lab/notes/reliability.md, "Soak"): mixed load on the built binary for
// RATERLIMITER_SOAK_DURATION (default 10m), sampling its heap, goroutines
// and open file descriptors. It runs only with RATERLIMITER_SOAK=1
// (scripts/soak.sh).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// soakOp is one kind of request the soak sends.
type soakOp struct {
	name   string
	weight int
	// do sends one request with ids drawn from id and returns an error
	// for any answer the contract does not allow.
	do func(c *http.Client, base string, rng *rand.Rand, id func() string) error
}

var soakAlgos = []string{"fixed", "sliding", "token"}

// soakScales are short, so buckets expire within the soak and sweeps delete
// them, and one long one, so some records live across many sweeps.
var soakScales = []int{250, 1000, 3000, 10000, 60000}

// soakDo sends a request and checks its status is one of want and, for
// JSON answers, that the body is valid JSON.
func soakDo(c *http.Client, method, u, contentType, body string, want ...int) error {
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if !slices.Contains(want, resp.StatusCode) {
		return fmt.Errorf("%s %s: status %d: %.200s", method, u, resp.StatusCode, b)
	}
	if resp.Header.Get("Content-Type") == "application/json" && !json.Valid(b) {
		return fmt.Errorf("%s %s: invalid JSON %.200q", method, u, b)
	}
	return nil
}

func soakCheck(rng *rand.Rand, id string) url.Values {
	v := url.Values{
		"id":    {id},
		"scale": {strconv.Itoa(soakScales[rng.IntN(len(soakScales))])},
		"limit": {strconv.Itoa(rng.IntN(20))},
		"algo":  {soakAlgos[rng.IntN(len(soakAlgos))]},
	}
	if rng.IntN(10) == 0 {
		v.Set("hits", strconv.Itoa(rng.IntN(3))) // peeks (0) and multi-hit checks
	}
	return v
}

var soakOps = []soakOp{
	{"GET /check_rate", 40, func(c *http.Client, base string, rng *rand.Rand, id func() string) error {
		return soakDo(c, "GET", base+"/check_rate?"+soakCheck(rng, id()).Encode(), "", "", 200, 429)
	}},
	{"POST /check_rate form", 10, func(c *http.Client, base string, rng *rand.Rand, id func() string) error {
		return soakDo(c, "POST", base+"/check_rate", "application/x-www-form-urlencoded", soakCheck(rng, id()).Encode(), 200, 429)
	}},
	{"POST /check_rate JSON", 10, func(c *http.Client, base string, rng *rand.Rand, id func() string) error {
		v := soakCheck(rng, id())
		b, _ := json.Marshal(v.Get("id"))
		body := fmt.Sprintf(`{"id":%s,"scale":%s,"limit":%s,"algo":%q}`, b, v.Get("scale"), v.Get("limit"), v.Get("algo"))
		return soakDo(c, "POST", base+"/check_rate", "application/json", body, 200, 429)
	}},
	{"POST /check_rates", 15, func(c *http.Client, base string, rng *rand.Rand, id func() string) error {
		var body bytes.Buffer
		body.WriteByte('[')
		for i := range 1 + rng.IntN(100) {
			if i > 0 {
				body.WriteByte(',')
			}
			v := soakCheck(rng, id())
			b, _ := json.Marshal(v.Get("id"))
			fmt.Fprintf(&body, `{"id":%s,"scale":%s,"limit":%s,"algo":%q}`, b, v.Get("scale"), v.Get("limit"), v.Get("algo"))
		}
		body.WriteByte(']')
		return soakDo(c, "POST", base+"/check_rates", "application/json", body.String(), 200)
	}},
	{"GET /buckets", 8, func(c *http.Client, base string, rng *rand.Rand, id func() string) error {
		return soakDo(c, "GET", base+"/buckets?id="+url.QueryEscape(id()), "", "", 200)
	}},
	{"DELETE /buckets", 4, func(c *http.Client, base string, rng *rand.Rand, id func() string) error {
		q := "id=" + url.QueryEscape(id())
		if rng.IntN(2) == 0 {
			q += "&scale=" + strconv.Itoa(soakScales[rng.IntN(len(soakScales))])
		}
		return soakDo(c, "DELETE", base+"/buckets?"+q, "", "", 200)
	}},
	{"GET /healthz", 3, func(c *http.Client, base string, _ *rand.Rand, _ func() string) error {
		return soakDo(c, "GET", base+"/healthz", "", "", 200)
	}},
	{"invalid check", 5, func(c *http.Client, base string, rng *rand.Rand, id func() string) error {
		v := soakCheck(rng, id())
		v.Set([]string{"scale", "limit", "algo", "hits"}[rng.IntN(4)], "-1")
		return soakDo(c, "GET", base+"/check_rate?"+v.Encode(), "", "", 400)
	}},
}

// TestSoak runs mixed load on the built binary (every algorithm, single and
// batch checks in three encodings, admin calls, health checks, invalid
// input) over ids that churn, so sweeps keep deleting; it samples the
// process every RATERLIMITER_SOAK_SAMPLE (default 5s) and asserts no error,
// that sweeps deleted records, and that the heap, goroutines and open file
// descriptors stay flat: the last third's maximum at most 1.5x the first
// third's (the heap) or at most 10 more (goroutines, descriptors).
func TestSoak(t *testing.T) {
	if os.Getenv("RATERLIMITER_SOAK") != "1" {
		t.Skip("set RATERLIMITER_SOAK=1 (and RATERLIMITER_SOAK_DURATION, default 10m) to soak the built binary (scripts/soak.sh)")
	}
	var (
		duration = envDuration(t, "RATERLIMITER_SOAK_DURATION", 10*time.Minute)
		every    = envDuration(t, "RATERLIMITER_SOAK_SAMPLE", 5*time.Second)
		workers  = envInt(t, "RATERLIMITER_SOAK_WORKERS", 4)
		// rate is each worker's requests a second: load, not a
		// benchmark; the machine is shared.
		rate = envInt(t, "RATERLIMITER_SOAK_RATE", 400)
		seed = uint64(envInt(t, "RATERLIMITER_SOAK_SEED", int(time.Now().UnixNano()%1e9)))
	)
	t.Logf("seed %d (RATERLIMITER_SOAK_SEED repeats it), %d workers at %d requests/s each for %v, a sample every %v",
		seed, workers, rate, duration, every)
	// Sweeps every 2 s, so churned ids are deleted many times over. The
	// timeout is 5 s rather than 1 s: the soak looks for leaks and errors,
	// not latency, and on the shared 2-core machine it was written on the
	// whole VM was seen to stall for over a second (a 503 by design).
	s := start(t, nil, "-sweep-interval", "2s", "-timeout", "5s")
	pid := s.Cmd.Process.Pid
	began := time.Now()

	total := 0
	for _, op := range soakOps {
		total += op.weight
	}
	var (
		mu     sync.Mutex
		errs   []string
		counts = map[string]int{}
		serial atomic.Int64 // the churn: new ids keep coming, old ones stop
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			// ids: mostly among the 500 newest, so ids repeat for a while
			// and then are left for the sweeper.
			id := func() string {
				n := serial.Add(1)
				return "soak-" + strconv.FormatInt(max(0, n-int64(rng.IntN(500))), 10)
			}
			tick := time.NewTicker(time.Second / time.Duration(rate))
			defer tick.Stop()
			local := map[string]int{}
			defer func() {
				mu.Lock()
				for k, v := range local {
					counts[k] += v
				}
				mu.Unlock()
			}()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				pick := rng.IntN(total)
				op := soakOps[0]
				for _, o := range soakOps {
					if pick < o.weight {
						op = o
						break
					}
					pick -= o.weight
				}
				local[op.name]++
				if err := op.do(c, s.base, rng, id); err != nil {
					mu.Lock()
					errs = append(errs, op.name+": "+err.Error())
					mu.Unlock()
				}
			}
		})
	}

	var samples []procSample
	var sampleErrs []string
	mc := &http.Client{Timeout: 10 * time.Second}
	tick := time.NewTicker(every)
	end := time.After(duration)
loop:
	for {
		select {
		case <-end:
			break loop
		case <-tick.C:
			sm, err := sampleProc(mc, s.base, pid)
			if err != nil {
				sampleErrs = append(sampleErrs, err.Error())
				continue
			}
			sm.at = time.Since(began)
			samples = append(samples, sm)
		}
	}
	tick.Stop()
	close(stop)
	wg.Wait()

	// The sidecar is still healthy and stops cleanly.
	require.Equal(t, 200, s.get(t, "/healthz").status)
	assert.NoError(t, s.stop(t), "exit status after SIGTERM\n%s", s.logs())

	requests := 0
	for _, n := range counts {
		requests += n
	}
	t.Logf("%d requests in %v: %v", requests, duration, counts)
	assert.Empty(t, sampleErrs, "sampling the process")
	if len(errs) > 0 {
		t.Errorf("%d requests failed; the first: %s", len(errs), strings.Join(errs[:min(10, len(errs))], "\n"))
	}
	require.GreaterOrEqual(t, len(samples), 6, "too few samples to judge")

	series := map[string][]float64{}
	for _, sm := range samples {
		series["heap"] = append(series["heap"], sm.heapAlloc)
		series["rss"] = append(series["rss"], float64(sm.rss))
		series["goroutines"] = append(series["goroutines"], sm.goroutines)
		series["fds"] = append(series["fds"], float64(sm.fds))
		series["live"] = append(series["live"], sm.live)
	}
	last := samples[len(samples)-1]
	assert.Positive(t, last.swept, "sweeps deleted nothing: the ids did not churn")
	t.Logf("%d samples, one every %v; swept %0.f records in all", len(samples), every, last.swept)
	for _, name := range []string{"heap", "rss", "goroutines", "fds", "live"} {
		vs := series[name]
		first, lastMax := thirds(vs)
		f := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
		if name == "heap" || name == "rss" {
			f = func(v float64) string { return mib(v) + " MiB" }
		}
		t.Logf("  %-10s %s  min %s max %s; max of first third %s, of last third %s", name, sparkline(vs),
			f(slices.Min(vs)), f(slices.Max(vs)), f(first), f(lastMax))
	}
	for _, sm := range samples {
		t.Logf("  t=%6.1fs heap %6s MiB  RSS %6s MiB  goroutines %3.0f  fds %3d  live %7.0f  swept %9.0f",
			sm.at.Seconds(), mib(sm.heapAlloc), mib(float64(sm.rss)), sm.goroutines, sm.fds, sm.live, sm.swept)
	}
	first, lastMax := thirds(series["heap"])
	assert.LessOrEqual(t, lastMax, 1.5*first, "the heap grew: last third's max %s MiB, first third's %s MiB", mib(lastMax), mib(first))
	first, lastMax = thirds(series["goroutines"])
	assert.LessOrEqual(t, lastMax, first+10, "goroutines grew")
	first, lastMax = thirds(series["fds"])
	assert.LessOrEqual(t, lastMax, first+10, "file descriptors grew")
}
