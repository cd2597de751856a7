package peers

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sethvargo/go-limiter/memorystore"
	"golang.org/x/time/rate"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/memory"
)

// ids is how many distinct ids the callers pick from.
const ids = 10_000

// limit is high enough that every check is allowed: the benchmark measures
// the hand-off and the store, not denials.
const limit = 1_000_000_000

var idNames = func() []string {
	s := make([]string, ids)
	for i := range s {
		s[i] = "user-" + strconv.Itoa(i)
	}
	return s
}()

// subject is one limiter under test: allow reports whether id may go on.
type subject struct {
	name  string
	start func(b *testing.B) (allow func(id string) bool, stop func())
}

var subjects = []subject{
	{"raterlimiter", func(b *testing.B) (func(string) bool, func()) {
		l := memory.New(memory.Config{SweepInterval: -1})
		ctx := context.Background()
		return func(id string) bool {
			d, err := l.CheckRate(ctx, rl.Request{ID: id, Scale: time.Minute, Limit: limit, Hits: 1})
			if err != nil {
				b.Error(err)
			}
			return d.Allowed
		}, func() { l.Close() }
	}},
	{"go-limiter", func(b *testing.B) (func(string) bool, func()) {
		s, err := memorystore.New(&memorystore.Config{Tokens: limit, Interval: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		return func(id string) bool {
			_, _, _, ok, err := s.Take(ctx, id)
			if err != nil {
				b.Error(err)
			}
			return ok
		}, func() { s.Close(context.Background()) }
	}},
	{"x-time-rate-map", func(*testing.B) (func(string) bool, func()) {
		var mu sync.Mutex
		m := make(map[string]*rate.Limiter)
		return func(id string) bool {
			mu.Lock()
			l, ok := m[id]
			if !ok {
				l = rate.NewLimiter(rate.Limit(limit/60), limit)
				m[id] = l
			}
			mu.Unlock()
			return l.Allow()
		}, func() {}
	}},
	{"mutex-map", func(*testing.B) (func(string) bool, func()) {
		type window struct {
			start int64
			count int64
		}
		var mu sync.Mutex
		m := make(map[string]*window)
		return func(id string) bool {
			now := time.Now().UnixMilli()
			mu.Lock()
			defer mu.Unlock()
			w, ok := m[id]
			if !ok {
				w = &window{}
				m[id] = w
			}
			if s := now - now%60_000; w.start != s {
				w.start, w.count = s, 0
			}
			w.count++
			return w.count <= limit
		}, func() {}
	}},
}

// BenchmarkPeers: one check per op, on ids picked at random (seeded) out of
// 10,000, from 128 and 4,096 goroutines.
func BenchmarkPeers(b *testing.B) {
	for _, g := range []int{128, 4096} {
		for _, s := range subjects {
			b.Run(fmt.Sprintf("g=%d/%s", g, s.name), func(b *testing.B) {
				allow, stop := s.start(b)
				defer stop()
				for _, id := range idNames { // every id exists: a steady state
					allow(id)
				}
				var seq atomic.Uint64
				var denied atomic.Int64
				b.SetParallelism(max(1, g/runtimeProcs()))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					r := rand.New(rand.NewPCG(1, seq.Add(1)))
					for pb.Next() {
						if !allow(idNames[r.IntN(ids)]) {
							denied.Add(1)
						}
					}
				})
				b.StopTimer()
				if n := denied.Load(); n != 0 {
					b.Fatalf("%d checks denied under a limit no check reaches", n)
				}
			})
		}
	}
}
