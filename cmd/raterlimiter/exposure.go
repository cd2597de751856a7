package main

import (
	"flag"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/internal/cli"
	"github.com/raterlimiter/raterlimiter/internal/defaults"
	"github.com/raterlimiter/raterlimiter/internal/policy"
	"github.com/raterlimiter/raterlimiter/internal/readfile"
)

// exposureFlags bound what a client can take of a sidecar reachable from
// the network, and where the admin endpoints answer.
type exposureFlags struct {
	adminListen    string
	adminTokenFile string
	metricsPublic  bool
	perIP          int
	perProxy       int
	trustedProxies string
	firstByte      time.Duration
	bodyBudget     int64
}

// exposureFlagNames lists them in the order -h shows them.
func exposureFlagNames() []string {
	return []string{"admin-listen", "admin-token-file", "metrics-public", "max-conns-per-ip", "max-conns-per-proxy", "trusted-proxies", "first-byte-timeout", "body-budget"}
}

func (f *exposureFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.adminListen, "admin-listen", "", "serve the admin endpoints (/buckets, /reload, /metrics, /debug/pprof/) on this address instead of -listen; empty: on -listen when it is loopback or has an admin token, refused (403) otherwise")
	fs.StringVar(&f.adminTokenFile, "admin-token-file", "", "read the admin token from this file (trailing newline dropped), so it is not seen in the process list; instead of -admin-token")
	fs.BoolVar(&f.metricsPublic, "metrics-public", false, "serve /metrics on -listen even where the admin endpoints are refused or on -admin-listen")
	fs.IntVar(&f.perIP, "max-conns-per-ip", defaults.MaxConnsPerIP, "most connections one client address may hold at once; more are answered 503 and closed at accept; -1: no bound")
	fs.IntVar(&f.perProxy, "max-conns-per-proxy", defaults.MaxConnsPerProxy, "the same bound for the addresses of -trusted-proxies")
	fs.StringVar(&f.trustedProxies, "trusted-proxies", "", "addresses and networks of reverse proxies, comma-separated (10.0.0.0/8,::1), held to -max-conns-per-proxy")
	fs.DurationVar(&f.firstByte, "first-byte-timeout", defaults.FirstByteTimeout, "close a new connection that sends nothing for this long (on -rls-listen: that has not sent its HTTP/2 preface)")
	fs.Int64Var(&f.bodyBudget, "body-budget", defaults.BodyBudget, "bytes of requests read or admitted and not yet answered, over all connections: a body over 16 KiB that does not fit is refused (503), and past it a connection holding more than 16 KiB of a request is closed; -1: no bound")
}

func (f *exposureFlags) validate(token string) (policy.Proxies, error) {
	switch {
	case f.perIP == 0 || f.perIP < -1:
		return policy.Proxies{}, cli.Usagef("-max-conns-per-ip must be positive, or -1 for no bound")
	case f.perProxy == 0 || f.perProxy < -1:
		return policy.Proxies{}, cli.Usagef("-max-conns-per-proxy must be positive, or -1 for no bound")
	case f.firstByte <= 0:
		return policy.Proxies{}, cli.Usagef("-first-byte-timeout must be positive")
	case f.bodyBudget == 0 || f.bodyBudget < -1:
		return policy.Proxies{}, cli.Usagef("-body-budget must be positive, or -1 for no bound")
	case f.adminTokenFile != "" && token != "":
		return policy.Proxies{}, cli.Usagef("-admin-token and -admin-token-file are exclusive: keep the file")
	}
	var list []string
	for _, p := range strings.Split(f.trustedProxies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			list = append(list, p)
		}
	}
	proxies, err := policy.ParseProxies(list...)
	if err != nil {
		return policy.Proxies{}, cli.Usagef("-trusted-proxies: %s", strings.TrimPrefix(err.Error(), "policy: "))
	}
	return proxies, nil
}

// adminToken is -admin-token, or the content of -admin-token-file.
func adminToken(token string, f exposureFlags) (string, error) {
	if f.adminTokenFile == "" {
		return token, nil
	}
	b, err := loadFile(&fileLoads{}, f.adminTokenFile, func() ([]byte, error) { return readfile.Read(f.adminTokenFile, maxTokenBytes) })
	if err != nil {
		return "", cli.Filef("-admin-token-file: %v", err)
	}
	t := strings.TrimRight(string(b), "\r\n")
	if t == "" {
		return "", cli.Filef("-admin-token-file %s is empty", f.adminTokenFile)
	}
	return t, nil
}

// adminAccess decides where the admin endpoints answer, from the main
// listener's address, the token and -admin-listen.
func adminAccess(main net.Addr, token string, f exposureFlags) api.AdminAccess {
	switch {
	case f.adminListen != "":
		return api.AdminSeparate
	case token != "" || isLoopback(main):
		return api.AdminOnMain
	}
	return api.AdminRefused
}

// isLoopback reports whether addr is reachable from this host only: a
// loopback address or a unix socket (the unspecified 0.0.0.0 and :: are
// not).
func isLoopback(addr net.Addr) bool {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}

// listenAdmin opens -admin-listen; one beyond loopback needs a token.
func listenAdmin(f exposureFlags, token string) (net.Listener, error) {
	if f.adminListen == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", f.adminListen)
	if err != nil {
		return nil, fmt.Errorf("-admin-listen: %w", err)
	}
	if !isLoopback(ln.Addr()) && token == "" {
		ln.Close()
		return nil, &cli.UsageError{Msg: "-admin-listen " + f.adminListen + " is beyond loopback: it needs -admin-token-file (or -admin-token)"}
	}
	return ln, nil
}
