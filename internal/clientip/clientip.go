// Package clientip finds the client's address of an HTTP request: the
// peer's, or behind trusted proxies the one they forward (X-Forwarded-For,
// X-Real-IP). The sidecar's policies and the middleware share it.
package clientip

import (
	"fmt"
	"net/netip"
	"strings"
	"unsafe"
)

// Proxies is a set of trusted proxy networks: the peers whose
// X-Forwarded-For and X-Real-IP headers are believed. The zero value trusts
// nobody. It is read-only once made and safe for concurrent use.
type Proxies struct {
	nets []netip.Prefix
}

// ParseProxies parses addresses ("10.0.0.1", "::1") and networks
// ("10.0.0.0/8", "::1/128") into a Proxies.
func ParseProxies(list ...string) (Proxies, error) {
	var p Proxies
	for _, s := range list {
		n, err := parseProxy(s)
		if err != nil {
			return Proxies{}, err
		}
		p.nets = append(p.nets, n)
	}
	return p, nil
}

func parseProxy(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		n, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("clientip: trusted proxy %q: %w", s, err)
		}
		if n.Addr().Is4In6() {
			return netip.Prefix{}, fmt.Errorf("clientip: trusted proxy %q: write an IPv4 network as IPv4", s)
		}
		return n.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("clientip: trusted proxy %q: %w", s, err)
	}
	a = a.Unmap().WithZone("")
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Trusted reports whether a is a trusted proxy.
func (p Proxies) Trusted(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// ClientIP returns the address a request came from. If the peer is not a
// trusted proxy, that is the peer. Otherwise it walks the X-Forwarded-For
// values (forwardedFor, each a comma-separated list, in the order the header
// lines came) from the right and returns the first address that is not a
// trusted proxy: addresses to its left were written by the client and prove
// nothing. If an entry does not parse, the walk stops at the address to its
// right (the last one a trusted proxy vouched for); if every entry is
// trusted, the left-most is returned. Without X-Forwarded-For, a valid
// X-Real-IP (realIP) from a trusted peer is believed. Addresses may carry a
// port; IPv4-mapped IPv6 addresses are returned as IPv4.
func (p Proxies) ClientIP(peer netip.Addr, forwardedFor []string, realIP string) netip.Addr {
	w := p.walker(peer)
	for i := len(forwardedFor) - 1; i >= 0 && !w.done; i-- {
		w.line(forwardedFor[i])
	}
	return w.end(realIP)
}

// ClientIPBytes is ClientIP for header values as byte slices (fasthttp's
// PeekAll); it allocates nothing.
func (p Proxies) ClientIPBytes(peer netip.Addr, forwardedFor [][]byte, realIP []byte) netip.Addr {
	w := p.walker(peer)
	for i := len(forwardedFor) - 1; i >= 0 && !w.done; i-- {
		w.line(bytesString(forwardedFor[i]))
	}
	return w.end(bytesString(realIP))
}

// bytesString shares b's memory as a string, for parsing only: nothing
// that is kept refers to it (netip interns a zone, and zones are dropped).
func bytesString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// xffWalk is where a walk of X-Forwarded-For stands.
type xffWalk struct {
	p    Proxies
	addr netip.Addr // the answer once done, else the last trusted hop
	seen bool       // an entry was seen
	done bool
}

func (p Proxies) walker(peer netip.Addr) xffWalk {
	peer = peer.Unmap().WithZone("")
	return xffWalk{p: p, addr: peer, done: !p.Trusted(peer)}
}

// line walks one header line's entries from the right.
func (w *xffWalk) line(list string) {
	for list != "" && !w.done {
		j := strings.LastIndexByte(list, ',')
		entry := strings.TrimSpace(list[j+1:])
		list = list[:max(j, 0)]
		if entry == "" {
			continue
		}
		w.seen = true
		a, ok := ParseAddr(entry)
		if !ok {
			w.done = true // the last trusted hop
			return
		}
		w.addr = a
		if !w.p.Trusted(a) {
			w.done = true
		}
	}
}

func (w *xffWalk) end(realIP string) netip.Addr {
	if !w.done && !w.seen && realIP != "" {
		if a, ok := ParseAddr(strings.TrimSpace(realIP)); ok {
			return a
		}
	}
	return w.addr
}

// ParseAddr parses "1.2.3.4", "1.2.3.4:80", "::1" or "[::1]:80";
// IPv4-mapped IPv6 addresses come back as IPv4, zones dropped.
func ParseAddr(s string) (netip.Addr, bool) {
	if len(s) == 0 || len(s) > 64 {
		return netip.Addr{}, false
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return a.Unmap().WithZone(""), true
		}
	}
	return netip.Addr{}, false
}
