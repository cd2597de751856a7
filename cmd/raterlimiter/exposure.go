package main

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/cli"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/readfile"
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
