package api

import (
	"strconv"
	"testing"

	"github.com/valyala/fasthttp"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/headers"
	"github.com/raterlimiter/raterlimiter/memory"
)

// BenchmarkDashboardFeed is GET /check_rate in memory (no network) over
// 10,000 ids, with the dashboard's top-k feed off and on, on the instant
// limiter (the API's own cost, where the feed weighs most) and on the
// embedded limiter. Compare each pair's ns/op in the same run.
func BenchmarkDashboardFeed(b *testing.B) {
	uris := make([][]byte, 10000)
	for i := range uris {
		uris[i] = []byte("/check_rate?id=user" + strconv.Itoa(i%1000) + "&scale=60000&limit=1000000")
	}
	lim := memory.New(memory.Config{SweepInterval: -1})
	b.Cleanup(func() { lim.Close() })
	for _, bc := range []struct {
		name string
		lim  rl.Limiter
	}{{"instant", instant{}}, {"memory", lim}} {
		for _, on := range []bool{false, true} {
			name := bc.name + "/feed-off"
			if on {
				name = bc.name + "/feed-on"
			}
			h := New(Config{Limiter: bc.lim, Dashboard: DashboardConfig{Off: !on}}).Handler
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				serveParallel(b, h, false, func(req *fasthttp.Request, i int) {
					req.SetRequestURIBytes(uris[i%len(uris)])
				})
			})
		}
	}
}

// BenchmarkDashboardObserve is the feed alone: one check's observe, over
// 1,000 ids, a tenth of them denied.
func BenchmarkDashboardObserve(b *testing.B) {
	d := newDashboard(DashboardConfig{})
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = "user" + strconv.Itoa(i)
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			d.observe(ids[i%len(ids)], headers.PolicyName, i%10 == 0)
			i++
		}
	})
}
