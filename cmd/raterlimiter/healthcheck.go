package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/cli"
)

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

// healthcheck is -healthcheck: the binary as its own probe, since a
// distroless image has no curl, and a Kubernetes exec probe (or a Docker
// HEALTHCHECK) runs `raterlimiter -healthcheck URL` instead; URL's path
// picks the check, /livez for liveness, /readyz for readiness (/healthz by
// default). It GETs rawURL once and returns nil iff it answered 200 within
// timeout; it writes the status and the answer's first line to stdout.
// Redirects are not followed: only the sidecar's own 200 counts.
func healthcheck(ctx context.Context, rawURL string, timeout time.Duration, stdout io.Writer) error {
	target, sock, err := healthTarget(rawURL)
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
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("healthcheck %s: no answer within %v", rawURL, timeout)
		}
		return fmt.Errorf("healthcheck %s: %w", rawURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 512))
	if err != nil {
		return fmt.Errorf("healthcheck %s: reading the answer: %w", rawURL, err)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck %s: %s: %.200q", rawURL, resp.Status, line)
	}
	fmt.Fprintf(stdout, "%s %.200q\n", resp.Status, line)
	return nil
}
