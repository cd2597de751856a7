package main

// The flood test (lab/notes/reliability.md, "Flood"): 10,000,000 distinct ids at full
// speed against the built binary with a small -max-buckets, beside a steady
// client whose latency is compared with and without the flood. It takes
// minutes, so it runs only with RATERLIMITER_FLOOD=1 (scripts/flood.sh).

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envInt reads an integer setting of these tests from the environment.
func envInt(t testing.TB, name string, def int) int {
	t.Helper()
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, name)
	return n
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err, name)
	return d
}

// steadyClient checks its own id rate times a second on one kept-alive
// connection until stop is closed, and records each check's latency (send
// to whole answer) under the phase current() names when it starts.
type steadyClient struct {
	base   string
	rate   int
	client *http.Client
	mu     sync.Mutex
	lat    map[string][]time.Duration
	errs   map[string][]string // by phase
}

func newSteadyClient(base string, rate int) *steadyClient {
	tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}
	return &steadyClient{base: base, rate: rate, client: &http.Client{Transport: tr, Timeout: 10 * time.Second},
		lat: map[string][]time.Duration{}, errs: map[string][]string{}}
}

func (c *steadyClient) run(stop <-chan struct{}, current func() string) {
	tick := time.NewTicker(time.Second / time.Duration(c.rate))
	defer tick.Stop()
	url := c.base + "/check_rate?id=steady&scale=1000&limit=1000000000"
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		phase := current()
		start := time.Now()
		resp, err := c.client.Get(url)
		var b []byte
		if err == nil {
			b, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		d := time.Since(start)
		c.mu.Lock()
		switch {
		case err != nil:
			c.errs[phase] = append(c.errs[phase], err.Error())
		case resp.StatusCode != 200:
			c.errs[phase] = append(c.errs[phase], fmt.Sprintf("status %d: %s", resp.StatusCode, b))
		default:
			c.lat[phase] = append(c.lat[phase], d)
		}
		c.mu.Unlock()
	}
}

// TestFlood sends RATERLIMITER_FLOOD_IDS (default 10,000,000) distinct ids in
// batches of 1000 from a separate process over a few connections, as fast as
// the sidecar takes them, to a sidecar started with -max-buckets 200000,
// while a steady client checks 200 times a second. Asserted: the live
// buckets never pass the cap, the heap stays under a bound and flat, and
// the steady client's p99 during the flood is within 2x of its p99 without.
func TestFlood(t *testing.T) {
	if os.Getenv("RATERLIMITER_FLOOD") != "1" {
		t.Skip("set RATERLIMITER_FLOOD=1 to flood the built binary with 10,000,000 distinct ids (minutes; scripts/flood.sh)")
	}
	var (
		ids        = envInt(t, "RATERLIMITER_FLOOD_IDS", 10_000_000)
		conns      = envInt(t, "RATERLIMITER_FLOOD_CONNS", 4)
		maxBuckets = envInt(t, "RATERLIMITER_FLOOD_MAX_BUCKETS", 200_000)
		// The flood runs in windows of this length, each followed by a
		// quiet window as long (the generator stopped with SIGSTOP), so
		// the steady client's latency with and without the flood is
		// measured under the same conditions of a shared machine.
		window = envDuration(t, "RATERLIMITER_FLOOD_WINDOW", 5*time.Second)
		rate   = envInt(t, "RATERLIMITER_FLOOD_STEADY_RATE", 200)
		// heapBound is what the heap must stay under: 256 bytes for
		// each of the cap's records (over twice what one costs with
		// these ids) and 32 MiB for the rest; a heap that followed the
		// ids sent rather than the cap would pass it 20 times over.
		heapBound = float64(32<<20 + maxBuckets*256)
	)
	// RATERLIMITER_FLOOD_ARGS adds flags to the sidecar's (e.g. "-shards 2").
	s := start(t, nil, append([]string{"-max-buckets", strconv.Itoa(maxBuckets)}, strings.Fields(os.Getenv("RATERLIMITER_FLOOD_ARGS"))...)...)
	pid := s.Cmd.Process.Pid
	began := time.Now()

	var phase atomic.Value
	phase.Store("warmup")
	current := func() string { return phase.Load().(string) }

	// Sample /metrics and /proc every second.
	stop := make(chan struct{})
	var (
		samplesMu sync.Mutex
		samples   []procSample
		sampleErr []string
	)
	mc := &http.Client{Timeout: 10 * time.Second}
	var bg sync.WaitGroup
	bg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			sm, err := sampleProc(mc, s.base, pid)
			samplesMu.Lock()
			if err != nil {
				sampleErr = append(sampleErr, err.Error())
			} else {
				sm.at, sm.phase = time.Since(began), current()
				samples = append(samples, sm)
			}
			samplesMu.Unlock()
		}
	})
	steady := newSteadyClient(s.base, rate)
	bg.Go(func() { steady.run(stop, current) })

	time.Sleep(2 * time.Second) // warm-up: the phases are measured in time

	floodStart := time.Now()
	var out bytes.Buffer
	// RATERLIMITER_FLOOD_GEN_NICE runs the generator at that nice value
	// (default 0, as the others): a flood arrives from other machines, and
	// a generator at nice 19 takes CPU from the sidecar and the steady
	// client only when they leave it idle. It still sends as fast as the
	// sidecar answers.
	genArgs := []string{os.Args[0], "-test.run", "^TestFloodGenerator$", "-test.v"}
	if n := envInt(t, "RATERLIMITER_FLOOD_GEN_NICE", 0); n != 0 {
		genArgs = append([]string{"nice", "-n", strconv.Itoa(n)}, genArgs...)
	}
	gen := exec.Command(genArgs[0], genArgs[1:]...)
	gen.Env = append(os.Environ(),
		"RATERLIMITER_FLOOD_GEN_TARGET="+s.base,
		"RATERLIMITER_FLOOD_GEN_IDS="+strconv.Itoa(ids),
		"RATERLIMITER_FLOOD_GEN_CONNS="+strconv.Itoa(conns),
		"RATERLIMITER_FLOOD_BATCH="+strconv.Itoa(envInt(t, "RATERLIMITER_FLOOD_BATCH", 1000)))
	gen.Stdout, gen.Stderr = &out, &out
	require.NoError(t, gen.Start())
	genDone := make(chan error, 1)
	go func() { genDone <- gen.Wait() }()
	// Never leave a stopped generator behind (SIGKILL ends it stopped or not).
	t.Cleanup(func() { _ = gen.Process.Kill() })
	// Alternate: flood for a window, then stop the generator for one. A
	// tenth of a window after each switch belongs to neither phase (the
	// batches in flight when the generator stops are still answered).
	var genErr error
	settle := window / 10
	stopped := false
cycles:
	for {
		phase.Store("switch")
		select {
		case genErr = <-genDone:
			break cycles
		case <-time.After(settle):
		}
		if stopped {
			phase.Store("quiet")
		} else {
			phase.Store("flood")
		}
		select {
		case genErr = <-genDone:
			break cycles
		case <-time.After(window - settle):
		}
		sig := syscall.SIGSTOP
		if stopped {
			sig = syscall.SIGCONT
		}
		require.NoError(t, gen.Process.Signal(sig))
		stopped = !stopped
	}
	floodTook := time.Since(floodStart)

	phase.Store("after")
	time.Sleep(2 * window)
	close(stop)
	bg.Wait()
	require.NoError(t, genErr, "the flood generator:\n%s", out.String())
	t.Logf("generator: %s", strings.TrimSpace(lastLines(out.String(), 3)))
	m := regexpSent.FindStringSubmatch(out.String())
	require.NotNil(t, m, "the generator reports what it sent:\n%s", out.String())
	sent, _ := strconv.Atoi(m[1])
	assert.Equal(t, ids, sent, "distinct ids sent and answered")
	t.Logf("flood: %d distinct ids in %v, half of it paused (%.0f ids/s while running) over %d connections, batches of %d",
		sent, floodTook.Round(time.Millisecond), 2*float64(sent)/floodTook.Seconds(), conns, envInt(t, "RATERLIMITER_FLOOD_BATCH", 1000))

	// The sidecar stayed up and answers.
	require.Equal(t, 200, s.get(t, "/healthz").status)
	assert.Empty(t, sampleErr, "sampling /metrics")
	for ph, errs := range steady.errs {
		assert.Empty(t, errs, "the steady client's checks failed in phase %s", ph)
	}

	var heaps, lives, rss []float64
	maxLive, maxHeap := 0.0, 0.0
	for _, sm := range samples {
		maxLive, maxHeap = max(maxLive, sm.live), max(maxHeap, sm.heapAlloc)
		if sm.phase == "flood" {
			heaps, lives, rss = append(heaps, sm.heapAlloc), append(lives, sm.live), append(rss, float64(sm.rss))
		}
	}
	t.Logf("samples each second during the flood (%d):", len(heaps))
	t.Logf("  heap MiB    %s  %s .. %s", sparkline(heaps), mib(minOf(heaps)), mib(maxOf(heaps)))
	t.Logf("  RSS MiB     %s  %s .. %s", sparkline(rss), mib(minOf(rss)), mib(maxOf(rss)))
	t.Logf("  live        %s  %.0f .. %.0f", sparkline(lives), minOf(lives), maxOf(lives))
	for _, sm := range samples {
		t.Logf("  t=%5.1fs %-6s heap %6s MiB  RSS %6s MiB  live %7.0f  goroutines %3.0f  fds %d",
			sm.at.Seconds(), sm.phase, mib(sm.heapAlloc), mib(float64(sm.rss)), sm.live, sm.goroutines, sm.fds)
	}
	assert.LessOrEqual(t, maxLive, float64(maxBuckets), "live buckets passed -max-buckets")
	assert.GreaterOrEqual(t, maxLive, 0.95*float64(maxBuckets), "the cap never bound: the flood did not fill it")
	assert.Less(t, maxHeap, heapBound, "heap %s MiB, bound %s MiB", mib(maxHeap), mib(heapBound))
	if first, last := thirds(heaps); first > 0 {
		t.Logf("heap during the flood: max of the first third %s MiB, of the last third %s MiB (%.2fx)", mib(first), mib(last), last/first)
		assert.LessOrEqual(t, last, 1.5*first, "the heap grew during the flood")
	}

	q, f, a := steady.lat["quiet"], steady.lat["flood"], steady.lat["after"]
	require.NotEmpty(t, q)
	require.NotEmpty(t, f)
	pq, pf := percentile(q, 99), percentile(f, 99)
	for _, ph := range []struct {
		name string
		ds   []time.Duration
	}{{"without the flood", q}, {"during the flood", f}, {"after the flood", a}} {
		t.Logf("steady client (%d checks/s) %-17s: %5d checks, p50 %v p90 %v p99 %v p99.9 %v max %v; %d failed",
			rate, ph.name, len(ph.ds), percentile(ph.ds, 50), percentile(ph.ds, 90), percentile(ph.ds, 99), percentile(ph.ds, 99.9), percentile(ph.ds, 100),
			len(steady.errs[map[string]string{"without the flood": "quiet", "during the flood": "flood", "after the flood": "after"}[ph.name]]))
	}
	t.Logf("p99 during the flood / without: %.2f", float64(pf)/float64(pq))
	assert.LessOrEqual(t, float64(pf), 2*float64(pq), "the steady client's p99 during the flood is more than 2x its p99 without")
}

var regexpSent = regexp.MustCompile(`flood generator: sent (\d+) ids`)

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func minOf(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	m := vs[0]
	for _, v := range vs {
		m = min(m, v)
	}
	return m
}

func maxOf(vs []float64) float64 {
	m := 0.0
	for _, v := range vs {
		m = max(m, v)
	}
	return m
}

// TestFloodGenerator is the flood's sending side, run by TestFlood in a
// process of its own (so its work does not disturb the steady client's
// measurements): RATERLIMITER_FLOOD_GEN_IDS distinct ids ("f0", "f1", ...)
// in batches of 1000 to RATERLIMITER_FLOOD_GEN_TARGET over
// RATERLIMITER_FLOOD_GEN_CONNS connections, each batch answered 200.
func TestFloodGenerator(t *testing.T) {
	target := os.Getenv("RATERLIMITER_FLOOD_GEN_TARGET")
	if target == "" {
		t.Skip("the sending side of TestFlood, run by it")
	}
	ids := envInt(t, "RATERLIMITER_FLOOD_GEN_IDS", 10_000_000)
	conns := envInt(t, "RATERLIMITER_FLOOD_GEN_CONNS", 4)
	batch := envInt(t, "RATERLIMITER_FLOOD_BATCH", 1000)
	batches := (ids + batch - 1) / batch
	tr := &http.Transport{MaxConnsPerHost: conns, MaxIdleConnsPerHost: conns}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		next, sent, unavailable atomic.Int64
		firstErr                atomic.Value
		latMu                   sync.Mutex
		lat                     []time.Duration // of each batch
	)
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			body := make([]byte, 0, 64<<10)
			for ctx.Err() == nil {
				b := int(next.Add(1) - 1)
				if b >= batches {
					return
				}
				lo, hi := b*batch, min((b+1)*batch, ids)
				body = append(body[:0], '[')
				for id := lo; id < hi; id++ {
					if id > lo {
						body = append(body, ',')
					}
					body = append(body, `{"id":"f`...)
					body = strconv.AppendInt(body, int64(id), 10)
					body = append(body, `","scale":600000,"limit":10}`...)
				}
				body = append(body, ']')
				// A batch the sidecar could not decide within its
				// -timeout gets 503 (overload, by the contract): counted,
				// and sent again, so every id is decided once.
				var err error
				for {
					t0 := time.Now()
					var resp *http.Response
					resp, err = client.Post(target+"/check_rates", "application/json", bytes.NewReader(body))
					if err != nil {
						break
					}
					var n int64
					n, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err != nil {
						break
					}
					took := time.Since(t0)
					latMu.Lock()
					lat = append(lat, took)
					latMu.Unlock()
					if resp.StatusCode == 503 {
						unavailable.Add(1)
						continue
					}
					if resp.StatusCode != 200 || n == 0 {
						err = fmt.Errorf("batch %d: status %d", b, resp.StatusCode)
					}
					break
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					cancel()
					return
				}
				sent.Add(int64(hi - lo))
			}
		})
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		t.Fatalf("flood generator: after %d ids: %v", sent.Load(), err)
	}
	fmt.Printf("flood generator: batch latency p50 %v p99 %v max %v; %d batches answered 503 and sent again\n",
		percentile(lat, 50), percentile(lat, 99), percentile(lat, 100), unavailable.Load())
	fmt.Printf("flood generator: sent %d ids\n", sent.Load())
}
