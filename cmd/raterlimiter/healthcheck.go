package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/raterlimiter/raterlimiter/internal/cli"
)

// healthFlags turn the binary into its own probe: a distroless image has
// no curl, and a Kubernetes exec probe (or a Docker HEALTHCHECK) runs
// `raterlimiter -healthcheck URL` instead: URL's path picks the check,
// /livez for liveness, /readyz for readiness (/healthz by default).
type healthFlags struct {
	url     string
	timeout time.Duration
}

// healthFlagNames lists them in the order -h shows them.
func healthFlagNames() []string { return []string{"healthcheck", "healthcheck-timeout"} }

func (f *healthFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "healthcheck", "", "probe a sidecar and exit: 0 if GET URL answers 200 within -healthcheck-timeout, 1 otherwise; URL is http://HOST:PORT[/PATH], https://… (verified against the system's roots) or unix:/path/to.sock[:/PATH] (GET PATH on the socket); PATH is /livez (liveness), /readyz (readiness) or /healthz, the default")
	fs.DurationVar(&f.timeout, "healthcheck-timeout", time.Second, "how long -healthcheck waits for the whole answer")
}

func (f *healthFlags) validate() error {
	if f.timeout <= 0 {
		return cli.Usagef("-healthcheck-timeout must be positive")
	}
	if f.url == "" {
		return nil
	}
	_, _, err := healthTarget(f.url)
	return err
}

// healthTarget is the URL to GET for a -healthcheck argument, and the unix
// socket to reach it through ("" for TCP). A socket's path is followed by
// the path to ask, as nginx writes it (unix:/path/to.sock:/readyz); a
// socket whose own path holds ":/" cannot be probed.
func healthTarget(raw string) (target, sock string, err error) {
	if rest, ok := strings.CutPrefix(raw, unixPrefix); ok {
		sock, path, _ := strings.Cut(rest, ":/")
		path = "/" + path
		if !strings.HasPrefix(sock, "/") || strings.ContainsAny(sock, "?#") || strings.ContainsAny(path, "?#") ||
			(&url.URL{Path: path}).EscapedPath() != path {
			return "", "", cli.Usagef("-healthcheck %q: want unix:/path/to.sock or unix:/path/to.sock:/PATH", raw)
		}
		if path == "/" {
			path = "/healthz"
		}
		return "http://localhost" + path, sock, nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", "", cli.Usagef("-healthcheck %q: want http://HOST:PORT[/PATH], https://HOST:PORT[/PATH] or unix:/path/to.sock", raw)
	}
	if u.Path == "" {
		u.Path = "/healthz"
	}
	return u.String(), "", nil
}

// healthcheck GETs f's URL once and returns nil iff it answered 200 within
// f.timeout; it writes the status and the answer's first line to stdout. Redirects are
// not followed: only the sidecar's own 200 counts.
func healthcheck(ctx context.Context, f healthFlags, stdout io.Writer) error {
	target, sock, err := healthTarget(f.url)
	if err != nil {
		return err
	}
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	if sock != "" {
		var d net.Dialer
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", sock) }
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("healthcheck %s: no answer within %v", f.url, f.timeout)
		}
		return fmt.Errorf("healthcheck %s: %w", f.url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 512))
	if err != nil {
		return fmt.Errorf("healthcheck %s: reading the answer: %w", f.url, err)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck %s: %s: %.200q", f.url, resp.Status, line)
	}
	fmt.Fprintf(stdout, "%s %.200q\n", resp.Status, line)
	return nil
}
