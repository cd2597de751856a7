package topk

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

func TestExactWhileRoomy(t *testing.T) {
	s := New(Config{Size: 8, Sample: 1})
	for i, n := range []int{5, 3, 9, 1} {
		for range n {
			s.Offer(fmt.Sprint("k", i))
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
	s := New(Config{Size: 32, Sample: 1})
	truth := map[string]uint64{}
	for range 200000 {
		var k string
		if rng.IntN(2) == 0 {
			k = fmt.Sprint("hot", rng.IntN(4)) // half the stream on 4 keys
		} else {
			k = fmt.Sprint("cold", rng.IntN(50000))
		}
		truth[k]++
		s.Offer(k)
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

func TestSampledCountsScale(t *testing.T) {
	s := New(Config{Size: 4, Sample: 10}) // rounds up to 16
	const n = 160000
	for range n {
		s.Offer("only")
	}
	top := s.Top(1)
	if len(top) != 1 || top[0].Key != "only" {
		t.Fatalf("Top(1) = %v", top)
	}
	// 10,000 expected samples, sd 97: 10 % is over 10 sd.
	if c := top[0].Count; c < n*9/10 || c > n*11/10 {
		t.Fatalf("count %d, want about %d", c, n)
	}
}

func TestKeyCopied(t *testing.T) {
	s := New(Config{Size: 2, Sample: 1})
	b := []byte("abc")
	s.Offer(string(b))
	b[0] = 'x'
	if top := s.Top(1); top[0].Key != "abc" {
		t.Fatalf("key changed with the caller's buffer: %q", top[0].Key)
	}
	s.Reset()
	if top := s.Top(1); len(top) != 0 {
		t.Fatalf("after Reset: %v", top)
	}
}

func TestConcurrentOffers(t *testing.T) {
	s := New(Config{Size: 16, Sample: 1})
	var wg sync.WaitGroup
	const per = 20000
	for g := range 4 {
		wg.Go(func() {
			for i := range per {
				s.Offer(fmt.Sprint("g", g, "/", i%8))
			}
		})
	}
	wg.Wait()
	var sum uint64
	for _, it := range s.Top(100) {
		sum += it.Count
	}
	if got := sum + s.Dropped(); got != 4*per {
		t.Fatalf("kept %d + dropped %d = %d, want %d", sum, s.Dropped(), got, 4*per)
	}
}

func BenchmarkOffer(b *testing.B) {
	s := New(Config{})
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprint("user-", i)
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			s.Offer(keys[i&1023])
			i++
		}
	})
}
