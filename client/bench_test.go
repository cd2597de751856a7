package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/client"
	"github.com/raterlimiter/raterlimiter/memory"
)

// BenchmarkTransport compares, against the same in-process sidecar over
// loopback, the client (on a fasthttp.HostClient) with the same GET
// /check_rate and JSON decoding done over net/http with a tuned Transport
// (the alternative), and over a bare fasthttp.HostClient (the floor).
// 16 callers per CPU cycle through 10,000 ids.
func BenchmarkTransport(b *testing.B) {
	const parallelism = 16 // callers per CPU: an application serving many requests
	lim := memory.New(memory.Config{SweepInterval: -1})
	b.Cleanup(func() { lim.Close() })
	base := sidecar(b, lim, "")
	addr := base[len("http://"):]
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = "user-" + strconv.Itoa(i)
	}
	uri := func(id string) string {
		return base + "/check_rate?id=" + url.QueryEscape(id) + "&scale=1000&limit=1000000&hits=1"
	}

	for _, mode := range []string{"ctx=background", "ctx=cancellable"} {
		cancellable := mode != "ctx=background"
		b.Run("client/"+mode, func(b *testing.B) {
			// ctx=cancellable is a request's context: the call runs its
			// exchange aside.
			c, err := client.New(client.Config{URL: base, Timeout: 10 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			var n atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(parallelism)
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				if cancellable {
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(ctx)
					defer cancel()
				}
				for pb.Next() {
					id := ids[n.Add(1)%int64(len(ids))]
					if _, err := c.CheckRate(ctx, rl.Request{ID: id, Scale: time.Second, Limit: 1_000_000, Hits: 1}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}

	b.Run("raw=net/http-tuned", func(b *testing.B) {
		hc := &http.Client{Transport: &http.Transport{
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 256,
			MaxConnsPerHost:     256,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		}}
		defer hc.CloseIdleConnections()
		var n atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(parallelism)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				id := ids[n.Add(1)%int64(len(ids))]
				resp, err := hc.Get(uri(id))
				if err != nil {
					b.Error(err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var d rl.Decision
				if err := json.Unmarshal(body, &d); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})

	b.Run("raw=fasthttp-hostclient", func(b *testing.B) {
		hc := &fasthttp.HostClient{Addr: addr, MaxConns: 256}
		defer hc.CloseIdleConnections()
		var n atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(parallelism)
		b.RunParallel(func(pb *testing.PB) {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for pb.Next() {
				id := ids[n.Add(1)%int64(len(ids))]
				req.SetRequestURI(uri(id))
				if err := hc.Do(req, resp); err != nil {
					b.Error(err)
					return
				}
				var d rl.Decision
				if err := json.Unmarshal(resp.Body(), &d); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkBatching compares the client with and without batching, in the
// same run, with 32 and 512 concurrent callers over 10,000 ids.
func BenchmarkBatching(b *testing.B) {
	lim := memory.New(memory.Config{SweepInterval: -1})
	b.Cleanup(func() { lim.Close() })
	base := sidecar(b, lim, "")
	ids := make([]string, 10_000)
	for i := range ids {
		ids[i] = "user-" + strconv.Itoa(i)
	}
	for _, callers := range []int{32, 512} {
		for _, batching := range []bool{false, true} {
			b.Run("callers="+strconv.Itoa(callers)+"/batching="+strconv.FormatBool(batching), func(b *testing.B) {
				cfg := client.Config{URL: base, Timeout: 10 * time.Second}
				if batching {
					cfg.BatchMaxSize = 500
				}
				c, err := client.New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				var n atomic.Int64
				b.ReportAllocs()
				b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					ctx := context.Background()
					for pb.Next() {
						id := ids[n.Add(1)%int64(len(ids))]
						if _, err := c.CheckRate(ctx, rl.Request{ID: id, Scale: time.Second, Limit: 1_000_000, Hits: 1}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
