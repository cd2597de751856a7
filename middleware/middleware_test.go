package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/clientip"
	"github.com/raterlimiter/raterlimiter/memory"
	"github.com/raterlimiter/raterlimiter/middleware"
	"github.com/raterlimiter/raterlimiter/middleware/internal/core"
)

func TestClientIP(t *testing.T) {
	p, err := core.ParseProxies("10.0.0.0/8", "192.168.1.1", "::1", "fd00::/8")
	require.NoError(t, err)
	tests := []struct {
		name   string
		peer   string
		xff    []string
		realIP string
		want   string
	}{
		{name: "untrusted peer: its headers are ignored", peer: "203.0.113.9", xff: []string{"1.1.1.1"}, realIP: "2.2.2.2", want: "203.0.113.9"},
		{name: "trusted peer without headers", peer: "10.1.2.3", want: "10.1.2.3"},
		{name: "one proxy", peer: "10.1.2.3", xff: []string{"198.51.100.7"}, want: "198.51.100.7"},
		{name: "right-most untrusted wins over a forged left part", peer: "10.1.2.3", xff: []string{"6.6.6.6, 198.51.100.7, 10.9.9.9"}, want: "198.51.100.7"},
		{name: "several headers read in order", peer: "10.1.2.3", xff: []string{"6.6.6.6", "198.51.100.7", "10.9.9.9"}, want: "198.51.100.7"},
		{name: "every hop trusted: the left-most", peer: "10.1.2.3", xff: []string{"10.0.0.7, 192.168.1.1"}, want: "10.0.0.7"},
		{name: "garbage stops at the last vouched address", peer: "10.1.2.3", xff: []string{"1.2.3.4, not-an-ip, 10.0.0.5"}, want: "10.0.0.5"},
		{name: "garbage right after the peer", peer: "10.1.2.3", xff: []string{"junk"}, want: "10.1.2.3"},
		{name: "empty entries are skipped", peer: "10.1.2.3", xff: []string{" , 198.51.100.7 ,, "}, want: "198.51.100.7"},
		{name: "ports and brackets", peer: "10.1.2.3", xff: []string{"[2001:db8::1]:443, 198.51.100.7:8080"}, want: "198.51.100.7"},
		{name: "bracketed IPv6", peer: "::1", xff: []string{"[2001:db8::1]"}, want: "2001:db8::1"},
		{name: "IPv4-mapped IPv6 peer", peer: "::ffff:10.1.2.3", xff: []string{"198.51.100.7"}, want: "198.51.100.7"},
		{name: "IPv4-mapped IPv6 client", peer: "10.1.2.3", xff: []string{"::ffff:198.51.100.7"}, want: "198.51.100.7"},
		{name: "X-Real-IP from a trusted peer", peer: "192.168.1.1", realIP: " 198.51.100.8 ", want: "198.51.100.8"},
		{name: "X-Forwarded-For beats X-Real-IP", peer: "192.168.1.1", xff: []string{"198.51.100.7"}, realIP: "198.51.100.8", want: "198.51.100.7"},
		{name: "bad X-Real-IP: the peer", peer: "192.168.1.1", realIP: "nope", want: "192.168.1.1"},
		{name: "IPv6 trusted network", peer: "fd12::1", xff: []string{"2001:db8::2"}, want: "2001:db8::2"},
		{name: "a neighbour of a trusted address is not trusted", peer: "192.168.1.2", xff: []string{"1.1.1.1"}, want: "192.168.1.2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := p.ClientIP(netip.MustParseAddr(tt.peer), tt.xff, tt.realIP)
			assert.Equal(t, tt.want, got.String())
		})
	}
	t.Run("nobody trusted by default", func(t *testing.T) {
		var none clientip.Proxies
		got := none.ClientIP(netip.MustParseAddr("127.0.0.1"), []string{"1.1.1.1"}, "2.2.2.2")
		assert.Equal(t, "127.0.0.1", got.String())
	})
}

func TestParseProxies(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "example.com", "1.2.3", "10.0.0.0/x", ""} {
		t.Run(fmt.Sprintf("refuses %q", bad), func(t *testing.T) {
			_, err := core.ParseProxies(bad)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "middleware: trusted proxy")
		})
	}
	t.Run("masks networks", func(t *testing.T) {
		p, err := core.ParseProxies("10.1.2.3/8")
		require.NoError(t, err)
		assert.True(t, p.Trusted(netip.MustParseAddr("10.200.0.1")))
		assert.False(t, p.Trusted(netip.MustParseAddr("11.0.0.1")))
	})
}

func TestPeerAddr(t *testing.T) {
	tests := []struct{ in, want string }{
		{"127.0.0.1:5555", "127.0.0.1"},
		{"[::1]:5555", "::1"},
		{"[fe80::1%eth0]:80", "fe80::1"},
		{"198.51.100.7", "198.51.100.7"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, ok := clientip.ParseAddr(tt.in)
			require.True(t, ok)
			assert.Equal(t, tt.want, a.String())
		})
	}
	for _, bad := range []string{"", "@", "/tmp/sock", "host:80"} {
		_, ok := clientip.ParseAddr(bad)
		assert.False(t, ok, bad)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	lim := memory.New(memory.Config{SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	sec := rl.Request{Scale: time.Second, Limit: 1}
	with := func(f func(*rl.Request)) rl.Request {
		r := sec
		f(&r)
		return r
	}
	tests := []struct {
		name string
		cfg  middleware.Config
		want string
	}{
		{"no policy at all", middleware.Config{Limiter: lim}, "Config.Policy.Limit is 0, which would deny every request"},
		{"a limit left out", middleware.Config{Limiter: lim, Policy: rl.Request{Scale: time.Minute}}, "Config.Policy.Limit is 0"},
		{"a peek without a limit", middleware.Config{Limiter: lim, Policy: rl.Request{Scale: time.Minute, Peek: true}}, "Config.Policy.Limit is 0"},
		{"the error says how to deny all", middleware.Config{Limiter: lim, Policy: rl.Request{Scale: time.Minute}}, "answer 429 from a handler of your own"},
		{"no limiter", middleware.Config{Policy: sec}, "Config.Limiter is nil"},
		{"zero scale", middleware.Config{Limiter: lim, Policy: rl.Request{Limit: 1}}, "invalid Scale: 0s"},
		{"negative limit", middleware.Config{Limiter: lim, Policy: with(func(r *rl.Request) { r.Limit = -1 })}, "invalid Limit: -1"},
		{"bad algo", middleware.Config{Limiter: lim, Policy: with(func(r *rl.Request) { r.Algo = 9 })}, "invalid Algo"},
		{"bad proxy", middleware.Config{Limiter: lim, Policy: sec, TrustedProxies: []string{"x"}}, "trusted proxy"},
		{"negative max delay", middleware.Config{Limiter: lim, Policy: with(func(r *rl.Request) { r.MaxDelay = -time.Millisecond })}, "invalid MaxDelay"},
		{"max delay of a fraction of a ms", middleware.Config{Limiter: lim, Policy: with(func(r *rl.Request) { r.MaxDelay = 1500 * time.Microsecond })}, "invalid MaxDelay"},
		{"a peek with hits", middleware.Config{Limiter: lim, Policy: with(func(r *rl.Request) { r.Peek, r.Hits = true, 1 })}, "invalid Hits: must be 0 with Peek"},
		{"policy by name on a limiter without policies", middleware.Config{Limiter: lim, PolicyName: "pages"}, "needs a limiter that checks by policy"},
		{"a policy beside its name", middleware.Config{Limiter: lim, PolicyName: "pages", Policy: sec}, "Config.Policy is set beside Config.PolicyName"},
		{"a bound on the wait beside a name", middleware.Config{Limiter: lim, PolicyName: "pages", Policy: rl.Request{MaxDelay: time.Second}}, "Config.Policy is set beside"},
		{"unknown missing-key mode", middleware.Config{Limiter: lim, Policy: sec, MissingKey: "allow"}, `Config.MissingKey is "allow": it must be "deny" (or empty), "skip" or "key:ip"`},
		{"missing-key modes are spelt as in a policies file", middleware.Config{Limiter: lim, Policy: sec, MissingKey: "Skip"}, `Config.MissingKey is "Skip"`},
		{"a fallback other than the address", middleware.Config{Limiter: lim, Policy: sec, MissingKey: "key:header:X-User"}, `Config.MissingKey is "key:header:X-User"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := core.New(tt.cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.True(t, strings.HasPrefix(err.Error(), "middleware: "), err.Error())
		})
	}
}

// TestPolicyIsTheRequest: Config.Policy is the request every check makes,
// its ID the request's key, its zero Hits one hit and its zero MaxDelay
// the default bound on the wait, 10 s.
func TestPolicyIsTheRequest(t *testing.T) {
	lim := memory.New(memory.Config{SweepInterval: -1})
	t.Cleanup(func() { lim.Close() })
	tests := []struct {
		name   string
		policy rl.Request
		want   rl.Request
	}{
		{"defaults", rl.Request{ID: "ignored", Scale: time.Second, Limit: 2},
			rl.Request{ID: "k", Scale: time.Second, Limit: 2, Hits: 1, MaxDelay: 10 * time.Second}},
		{"a bound on the wait", rl.Request{Scale: time.Second, Limit: 5, Algo: rl.Leaky, Queue: 3, MaxDelay: 300 * time.Millisecond},
			rl.Request{ID: "k", Scale: time.Second, Limit: 5, Hits: 1, Algo: rl.Leaky, Queue: 3, MaxDelay: 300 * time.Millisecond}},
		{"a peek counts nothing", rl.Request{Scale: time.Minute, Limit: 2, Peek: true, Algo: rl.Slices, Slices: 6},
			rl.Request{ID: "k", Scale: time.Minute, Limit: 2, Peek: true, Algo: rl.Slices, Slices: 6, MaxDelay: 10 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := core.New(middleware.Config{Limiter: lim, Policy: tt.policy})
			require.NoError(t, err)
			r, _, out := c.Check(context.Background(), "k", nil)
			require.Equal(t, core.Pass, out)
			assert.Equal(t, tt.want, r)
		})
	}
}

// failing is a Limiter that always fails with err.
type failing struct{ err error }

func (f failing) CheckRate(context.Context, rl.Request) (rl.Decision, error) {
	return rl.Decision{}, f.err
}

func (f failing) CheckRates(context.Context, []rl.Request) ([]rl.Decision, error) {
	return nil, f.err
}

func TestCheckOutcomes(t *testing.T) {
	clock := func() time.Time { return time.UnixMilli(1_700_000_000_000) }
	lim := memory.New(memory.Config{Clock: clock, SweepInterval: -1, MaxIDBytes: 32})
	t.Cleanup(func() { lim.Close() })
	down := fmt.Errorf("sidecar down: %w", rl.ErrUnavailable)
	tests := []struct {
		name    string
		limiter rl.Limiter
		missing string
		keys    []string
		want    []core.Outcome
		errs    int
	}{
		{"allows to the limit then denies", lim, "", []string{"a", "a", "a", "b"},
			[]core.Outcome{core.Pass, core.Pass, core.Deny, core.Pass}, 0},
		{"a missing key is refused", lim, "", []string{"", " ", "\t\r\n", "\u00a0"},
			[]core.Outcome{core.NoKey, core.NoKey, core.NoKey, core.NoKey}, 0},
		{"a missing key is let through", lim, "skip", []string{"", " "},
			[]core.Outcome{core.Unlimited, core.Unlimited}, 0},
		{"a missing key counts by the address", lim, "key:ip", []string{"", " ", ""},
			[]core.Outcome{core.Pass, core.Pass, core.Deny}, 0},
		{"a missing key is checked before the limiter", failing{down}, "", []string{""}, []core.Outcome{core.NoKey}, 0},
		{"limiter down", failing{down}, "", []string{"a"}, []core.Outcome{core.Unavailable}, 1},
		{"unknown error", failing{errors.New("odd")}, "", []string{"a"}, []core.Outcome{core.Unavailable}, 1},
		{"key refused", lim, "", []string{strings.Repeat("k", 40)}, []core.Outcome{core.BadKey}, 1},
		{"key refused, whatever the limiter's error", failing{fmt.Errorf("%w", rl.ErrInvalid)}, "", []string{"a"}, []core.Outcome{core.BadKey}, 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errs []error
			c, err := core.New(middleware.Config{
				Limiter:    tt.limiter,
				Policy:     rl.Request{Scale: time.Second, Limit: 2},
				MissingKey: tt.missing,
				OnError:    func(err error) { errs = append(errs, err) },
			})
			require.NoError(t, err)
			ip := fmt.Sprint("192.0.2.", i) // fresh counters per case
			var got []core.Outcome
			for _, k := range tt.keys {
				if strings.TrimSpace(k) != "" && len(k) < 8 {
					k = fmt.Sprint(i, k) // fresh ids per case
				}
				_, _, out := c.Check(context.Background(), k, func() string { return ip })
				got = append(got, out)
			}
			assert.Equal(t, tt.want, got)
			assert.Len(t, errs, tt.errs)
		})
	}
}

// byName is a limiter that checks by policy name and answers d and r.
type byName struct {
	failing
	d rl.Decision
	r rl.Request
}

func (b byName) CheckPolicy(context.Context, string, string, int64) (rl.Decision, rl.Request, error) {
	return b.d, b.r, nil
}

// TestAllowedWithoutAPolicy: an allowed answer by name that does not say
// its policy (the client failing open) goes on without headers, rather
// than with a policy of limit 0.
func TestAllowedWithoutAPolicy(t *testing.T) {
	for _, tt := range []struct {
		name string
		lim  byName
		want core.Outcome
	}{
		{"the policy is known", byName{d: rl.Decision{Allowed: true, Limit: 2}, r: rl.Request{Scale: time.Second, Limit: 2}}, core.Pass},
		{"the policy is not known", byName{d: rl.Decision{Allowed: true}}, core.Unlimited},
		{"denied", byName{d: rl.Decision{}, r: rl.Request{Scale: time.Second}}, core.Deny},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := core.New(middleware.Config{Limiter: tt.lim, PolicyName: "p"})
			require.NoError(t, err)
			_, _, out := c.Check(context.Background(), "k", nil)
			assert.Equal(t, tt.want, out)
		})
	}
}

func TestDenyBody(t *testing.T) {
	assert.Equal(t, "Too many requests, retry in 3 s\n", core.DenyBody(rl.Decision{RetryAfter: 2001 * time.Millisecond}))
	assert.Equal(t, "Too many requests, retry in 1 s\n", core.DenyBody(rl.Decision{RetryAfter: 0}))
}

// FuzzClientIP feeds arbitrary header values to ClientIP: it never panics,
// ignores the headers of an untrusted peer, and returns the peer or an
// address named in the headers.
func FuzzClientIP(f *testing.F) {
	f.Add("10.0.0.1", "1.2.3.4, 10.0.0.2", "")
	f.Add("10.0.0.1", "", "5.6.7.8")
	f.Add("203.0.113.1", "1.2.3.4", "5.6.7.8")
	f.Add("10.0.0.1", "[::1]:80,::ffff:1.2.3.4, junk ,,", "x")
	f.Add("::ffff:10.0.0.1", "fd00::1, 2001:db8::1", "")
	p, err := core.ParseProxies("10.0.0.0/8", "fd00::/8")
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, peer, xff, realIP string) {
		pa, ok := clientip.ParseAddr(peer)
		if !ok {
			return
		}
		got := p.ClientIP(pa, []string{xff}, realIP)
		require.True(t, got.IsValid())
		want := pa.Unmap().WithZone("")
		if !p.Trusted(pa) {
			assert.Equal(t, want, got)
			return
		}
		if got == want {
			return
		}
		named := false
		for _, s := range append(strings.Split(xff, ","), realIP) {
			if a, ok := clientip.ParseAddr(strings.TrimSpace(s)); ok && a == got {
				named = true
			}
		}
		assert.True(t, named, "%v is neither the peer nor in the headers", got)
	})
}
