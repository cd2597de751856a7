package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/valyala/fasthttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// cpuTicks is the process's user and system time, in clock ticks.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// BenchmarkRLSAgainstHTTP runs one sidecar with both faces on the memory
// backend and drives each from 64 concurrent callers, one check per call,
// over 10,000 keys: gRPC ShouldRateLimit with one descriptor against GET
// /check_rate of the same limit. It reports the calls per second and the
// sidecar's CPU per call (from /proc), the load generator running beside
// it on the same two cores.
func BenchmarkRLSAgainstHTTP(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(dir+"/bench.yaml", []byte("domain: bench\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 4000000000}\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	s := start(b, nil, "-rls-listen", "127.0.0.1:0", "-rls-config", dir)
	addr := s.listenAddr(b, "rls")
	conns := envInt(b, "RLS_BENCH_CONNS", 1) // gRPC connections the 64 callers share
	var rcs []rlspb.RateLimitServiceClient
	for range conns {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		rcs = append(rcs, rlspb.NewRateLimitServiceClient(conn))
	}
	hc := &fasthttp.HostClient{Addr: s.addr, MaxConns: 64}
	const callers = 64
	for _, face := range []string{"grpc", "http"} {
		b.Run(face, func(b *testing.B) {
			var next atomic.Int64
			var wg sync.WaitGroup
			cpu0, start := cpuTicks(s.Cmd.Process.Pid), time.Now()
			for c := range callers {
				rc := rcs[c%len(rcs)]
				wg.Go(func() {
					req := &rlspb.RateLimitRequest{Domain: "bench"}
					var hreq fasthttp.Request
					var hresp fasthttp.Response
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						key := "u" + strconv.FormatInt(i%10_000, 10)
						if face == "grpc" {
							req.Descriptors = []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: key}}}}
							resp, err := rc.ShouldRateLimit(context.Background(), req)
							if err != nil || resp.OverallCode != rlspb.RateLimitResponse_OK {
								b.Errorf("grpc: %v %v", resp, err)
								return
							}
							continue
						}
						hreq.SetRequestURI("http://" + s.addr + "/check_rate?id=" + key + "&scale=60000&limit=4000000000")
						if err := hc.Do(&hreq, &hresp); err != nil || hresp.StatusCode() != 200 {
							b.Errorf("http: %d %v", hresp.StatusCode(), err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			ticks := cpuTicks(s.Cmd.Process.Pid) - cpu0
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
			b.ReportMetric(float64(ticks)*1e4/float64(b.N), "server-cpu-us/call") // 100 ticks a second
		})
	}
	if err := s.stop(b); err != nil {
		b.Error(err)
	}
}
