package main

// Sampling a running sidecar's resources for the flood and soak tests: its
// /metrics and its /proc entries.

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// procSample is one look at a running sidecar.
type procSample struct {
	at         time.Duration // since the test began
	phase      string
	heapAlloc  float64 // go_memstats_heap_alloc_bytes
	goroutines float64 // go_goroutines
	live       float64 // raterlimiter_live_buckets
	swept      float64 // raterlimiter_swept_buckets_total
	rss        int64   // VmRSS from /proc/PID/status, bytes
	fds        int     // entries of /proc/PID/fd
}

// sampleProc reads /metrics at base and /proc/pid.
func sampleProc(c *http.Client, base string, pid int) (procSample, error) {
	var s procSample
	resp, err := c.Get(base + "/metrics")
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return s, fmt.Errorf("/metrics: status %d", resp.StatusCode)
	}
	want := map[string]*float64{
		"go_memstats_heap_alloc_bytes":     &s.heapAlloc,
		"go_goroutines":                    &s.goroutines,
		"raterlimiter_live_buckets":        &s.live,
		"raterlimiter_swept_buckets_total": &s.swept,
	}
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if p := want[name]; ok && p != nil {
			if *p, err = strconv.ParseFloat(val, 64); err != nil {
				return s, fmt.Errorf("/metrics: %s: %v", name, err)
			}
			found++
		}
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if found != len(want) {
		return s, fmt.Errorf("/metrics: found %d of the series %v", found, want)
	}
	if s.rss, err = readRSS(pid); err != nil {
		return s, err
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.fds = len(fds)
	return s, nil
}

// readRSS returns the resident memory of process pid, in bytes.
func readRSS(pid int) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmRSS %q: %v", rest, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS line", pid)
}

// mib formats bytes as MiB.
func mib(b float64) string { return fmt.Sprintf("%.1f", b/(1<<20)) }

// percentile returns the p-th percentile (0 < p <= 100) of ds by the
// nearest-rank method; ds is sorted in place.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(float64(len(ds))*p/100+0.999999) - 1
	return ds[min(max(rank, 0), len(ds)-1)]
}

// sparkline draws vs as a line of block characters, lowest to highest.
func sparkline(vs []float64) string {
	if len(vs) == 0 {
		return ""
	}
	lo, hi := slices.Min(vs), slices.Max(vs)
	const blocks = "▁▂▃▄▅▆▇█"
	rs := []rune(blocks)
	var b strings.Builder
	for _, v := range vs {
		i := 0
		if hi > lo {
			i = int((v - lo) / (hi - lo) * float64(len(rs)-1))
		}
		b.WriteRune(rs[i])
	}
	return b.String()
}

// thirds returns the max of the first and of the last third of vs.
func thirds(vs []float64) (first, last float64) {
	n := len(vs) / 3
	if n == 0 {
		return 0, 0
	}
	return slices.Max(vs[:n]), slices.Max(vs[len(vs)-n:])
}
