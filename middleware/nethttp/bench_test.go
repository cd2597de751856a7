package nethttp_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/memory"
	"github.com/raterlimiter/raterlimiter/middleware"
	"github.com/raterlimiter/raterlimiter/middleware/nethttp"
)

// BenchmarkMiddleware measures what the middleware with the embedded
// limiter adds to a handler, beside the bare handler in the same run:
// parallel requests from 10,000 peer addresses, in-process (no network).
func BenchmarkMiddleware(b *testing.B) {
	lim := memory.New(memory.Config{SweepInterval: -1})
	b.Cleanup(func() { lim.Close() })
	mw, err := nethttp.New(middleware.Config{Limiter: lim,
		Policy: rl.Request{Scale: time.Second, Limit: 1 << 30}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	peers := make([]string, 10_000)
	for i := range peers {
		peers[i] = "198.51." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256) + ":40000"
	}
	for _, tc := range []struct {
		name string
		h    http.Handler
	}{{"bare", app}, {"limited", mw(app)}} {
		b.Run(tc.name, func(b *testing.B) {
			var n atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				for pb.Next() {
					req.RemoteAddr = peers[n.Add(1)%int64(len(peers))]
					w := httptest.NewRecorder()
					tc.h.ServeHTTP(w, req)
					if w.Code != http.StatusNoContent {
						b.Fatalf("status %d", w.Code)
					}
				}
			})
		})
	}
}
