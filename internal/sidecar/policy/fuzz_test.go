package policy_test

import (
	"net/netip"
	"testing"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/clientip"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
)

// FuzzParse wants no panic, and of every file that loads, policies within
// the contract's bounds.
func FuzzParse(f *testing.F) {
	f.Add([]byte(example))
	f.Add([]byte(manyPolicies(3)))
	f.Add([]byte("policies:\n  - {name: a, key: [ip, 'header:X'], limit: 1, scale: 1ms, plans: {from: 'header:P', limits: {x: 2}}}\n"))
	f.Add([]byte("trusted_proxies: [::1/128]\npolicies: &a\n  - {name: b, key: ip, limit: 1, scale: 1s}\n"))
	f.Add([]byte("policies:\n  - <<: {name: c}\n"))
	f.Add([]byte("policies:\n  - {name: d, match: {path_prefix: /api/}, key: 'header:K', missing_key: 'key:ip', limit: 1, scale: 1s}\n"))
	f.Add([]byte("policies:\n  - {name: e, match: {path_prefix: '/a//b'}, key: ip, missing_key: skip, limit: 1, scale: 1s}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := policy.Parse("f.yaml", data)
		if err != nil {
			return
		}
		if len(file.Policies) == 0 || len(file.Policies) > policy.MaxPolicies {
			t.Fatalf("%d policies loaded", len(file.Policies))
		}
		for _, p := range file.Policies {
			r := rl.Request{ID: "x", Scale: time.Duration(p.Scale) * time.Millisecond, Limit: p.Limit, Hits: p.Hits, Algo: p.Algo}
			if err := check.Validate(r, 0); err != nil || p.Hits < 1 || len(p.Key) == 0 || file.Lookup(p.Name) == nil {
				t.Fatalf("policy %+v loaded out of bounds: %v", p, err)
			}
			if pp := p.Match.PathPrefix; pp != "" {
				var cp policy.Path
				if _, err := policy.CleanPath(&cp, []byte(pp), nil); err != nil || cp.Written != nil || string(cp.Resolved) != pp {
					t.Fatalf("path_prefix %q loaded, which no clean path can begin with", pp)
				}
			}
			if p.Plans != nil {
				for _, l := range p.Plans {
					r.Limit = l
					if check.Validate(r, 0) != nil {
						t.Fatalf("plan limit %d out of bounds", l)
					}
				}
			}
		}
	})
}

// FuzzMatch feeds any header values and path: the key is exactly the
// header's bytes, and only policies whose match holds apply.
func FuzzMatch(f *testing.F) {
	file, err := policy.Parse("p.yaml", []byte(example))
	if err != nil {
		f.Fatal(err)
	}
	f.Add("GET", "/api/x", "k&hits=0", "u", "1.1.1.1, 2.2.2.2")
	f.Add("POST", "/login", "k%26hits%3D0", "", "garbage")
	f.Add("GET", "/api/", "k?id=x", "k", "[::1]:80,,")
	f.Fuzz(func(t *testing.T, method, path, apiKey, user, xff string) {
		in := input(method, "h", path, "127.0.0.1", "X-Api-Key", apiKey, "X-User", user, "X-Forwarded-For", xff)
		cs, _ := file.Match(in, nil, nil)
		for _, c := range cs {
			switch c.Rule.Name {
			case "api":
				if string(c.Key) != string(in.Header.Peek("X-Api-Key")) {
					t.Fatalf("key %q for header %q", c.Key, apiKey)
				}
				if c.MissingKey != (len(in.Header.Peek("X-Api-Key")) == 0) {
					t.Fatalf("missing key %v for header %q", c.MissingKey, apiKey)
				}
			case "login":
				t.Fatalf("login matched host h")
			}
		}
		ip := file.ClientIP(in)
		if !ip.IsValid() {
			t.Fatalf("no client address for XFF %q", xff)
		}
	})
}

// FuzzClientIP wants a valid address for any headers, and the peer itself
// whenever the peer is not trusted.
func FuzzClientIP(f *testing.F) {
	proxies, err := clientip.ParseProxies("127.0.0.1", "10.0.0.0/8", "::1/128")
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{127, 0, 0, 1}, "1.2.3.4, 10.0.0.1", "")
	f.Add([]byte{10, 1, 1, 1}, "", "[2001:db8::1]:80")
	f.Add([]byte{1, 2, 3, 4}, "5.6.7.8", "9.9.9.9")
	f.Fuzz(func(t *testing.T, peerBytes []byte, xff, realIP string) {
		peer, ok := netip.AddrFromSlice(peerBytes)
		if !ok {
			return
		}
		got := proxies.ClientIP(peer, []string{xff}, realIP)
		if !got.IsValid() {
			t.Fatalf("no address")
		}
		if !proxies.Trusted(peer) && got != peer.Unmap().WithZone("") {
			t.Fatalf("untrusted peer %v answered as %v", peer, got)
		}
		if b := proxies.ClientIPBytes(peer, [][]byte{[]byte(xff)}, []byte(realIP)); b != got {
			t.Fatalf("bytes %v, strings %v", b, got)
		}
	})
}
