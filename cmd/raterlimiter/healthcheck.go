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
// `raterlimiter -healthcheck URL` instead.
type healthFlags struct {
	url     string
	timeout time.Duration
}

// healthFlagNames lists them in the order -h shows them.
func healthFlagNames() []string { return []string{"healthcheck", "healthcheck-timeout"} }

func (f *healthFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "healthcheck", "", "probe a sidecar and exit: 0 if GET URL answers 200 within -healthcheck-timeout, 1 otherwise; URL is http://HOST:PORT[/PATH] (path default /healthz), https://… (verified against the system's roots) or unix:/path/to.sock (GET /healthz on the socket)")
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
// socket to reach it through ("" for TCP).
func healthTarget(raw string) (target, sock string, err error) {
	if path, ok := strings.CutPrefix(raw, unixPrefix); ok {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "?#") {
			return "", "", cli.Usagef("-healthcheck %q: want unix:/path/to.sock", raw)
		}
		return "http://localhost/healthz", path, nil
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
