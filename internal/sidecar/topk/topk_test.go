package topk

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

func TestExactWhileRoomy(t *testing.T) {
	s := New(8)
	for i, n := range []int{5, 3, 9, 1} {
		for range n {
			s.Add(fmt.Sprint("k", i), 1)
		}
	}
	got := s.Top(3)
	want := []Item{{Key: "k2", Count: 9}, {Key: "k0", Count: 5}, {Key: "k1", Count: 3}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Top(3) = %v, want %v", got, want)
	}
}

// TestHeavyHittersFound feeds a skewed stream far larger than the sketch and
// checks that the true heaviest keys come out on top, with counts within the
// error bound the sketch reports.
func TestHeavyHittersFound(t *testing.T) {
	seed := uint64(20261123)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	s := New(32)
	truth := map[string]uint64{}
	for range 200000 {
		var k string
		if rng.IntN(2) == 0 {
			k = fmt.Sprint("hot", rng.IntN(4)) // half the stream on 4 keys
		} else {
			k = fmt.Sprint("cold", rng.IntN(50000))
		}
		truth[k]++
		s.Add(k, 1)
	}
	top := s.Top(4)
	for _, it := range top {
		if it.Key[:3] != "hot" {
			t.Fatalf("Top(4) = %v: %q is not one of the hot keys", top, it.Key)
		}
		if it.Count < truth[it.Key] || it.Count-it.Err > truth[it.Key] {
			t.Errorf("%s: count %d err %d, true %d: outside the bound", it.Key, it.Count, it.Err, truth[it.Key])
		}
	}
}

func TestKeyCopied(t *testing.T) {
	s := New(2)
	b := []byte("abc")
	s.Add(string(b), 1)
	b[0] = 'x'
	if top := s.Top(1); top[0].Key != "abc" {
		t.Fatalf("key changed with the caller's buffer: %q", top[0].Key)
	}
}

// TestConcurrentAdds adds from four goroutines into a sketch with room for
// every key, so nothing is replaced: each key's count is what reached it
// (Add drops a count that meets a busy lock), never more than was added.
func TestConcurrentAdds(t *testing.T) {
	s := New(32)
	var wg sync.WaitGroup
	const per = 20000
	for g := range 4 {
		wg.Go(func() {
			for i := range per {
				s.Add(fmt.Sprint("g", g, "/", i%8), 1)
			}
		})
	}
	wg.Wait()
	top := s.Top(100)
	if len(top) == 0 {
		t.Fatal("no key counted")
	}
	for _, it := range top {
		if it.Count > per/8 || it.Err != 0 {
			t.Errorf("%s: count %d err %d, at most %d added and no key replaced", it.Key, it.Count, it.Err, per/8)
		}
	}
}

func BenchmarkAdd(b *testing.B) {
	s := New(DefaultSize)
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprint("user-", i)
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			s.Add(keys[i&1023], 1)
			i++
		}
	})
}
