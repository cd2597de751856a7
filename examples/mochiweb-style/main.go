// Command mochiweb-style is the Mochiweb application of the article behind
// raterlimiter, in Go: a static file server that lets each peer address make
// 500 requests per 30 seconds, the article's
//
//	check_rate(Req:get(peer), 30000, 500)
//
// and answers 429 Too Many Requests with Retry-After past that (the article
// answered 413; 429 is the code for it now). It limits with the embedded
// limiter, or with a running sidecar when -sidecar names one.
//
//	go run ./examples/mochiweb-style -dir examples/mochiweb-style/public
//	go run ./examples/mochiweb-style -sidecar http://127.0.0.1:8080
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/client"
	"github.com/raterlimiter/raterlimiter/memory"
	"github.com/raterlimiter/raterlimiter/middleware"
	"github.com/raterlimiter/raterlimiter/middleware/nethttp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "mochiweb-style:", err)
		var ue *usageError
		if errors.As(err, &ue) {
			os.Exit(2) // a bad flag, as the flag package's own convention
		}
		os.Exit(1)
	}
}

// usageError is a bad flag or argument (exit status 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// config is what the flags set.
type config struct {
	listen  string
	dir     string
	sidecar string
	scale   time.Duration
	limit   int64
	proxies string
	timeout time.Duration
	clock   func() time.Time // tests inject one; nil is the system clock
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("mochiweb-style", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8000", "address to serve on")
	fs.StringVar(&c.dir, "dir", "./public", "directory of static files to serve")
	fs.StringVar(&c.sidecar, "sidecar", "", "URL of a raterlimiter sidecar, e.g. http://127.0.0.1:8080 (default: the embedded limiter)")
	fs.DurationVar(&c.scale, "scale", 30*time.Second, "window of the limit")
	fs.Int64Var(&c.limit, "limit", 500, "requests per window and peer address")
	fs.DurationVar(&c.timeout, "timeout", time.Second, "longest wait for the sidecar's answer before the request is let through")
	fs.StringVar(&c.proxies, "trusted-proxies", "", "comma-separated addresses or CIDRs of proxies whose X-Forwarded-For is believed")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if c.scale < time.Millisecond {
		return c, fmt.Errorf("-scale %v: must be at least 1ms", c.scale)
	}
	return c, nil
}

// newApp returns the rate-limited file server and a function that releases
// its limiter.
func newApp(c config, log *slog.Logger) (http.Handler, func(), error) {
	if st, err := os.Stat(c.dir); err != nil || !st.IsDir() {
		return nil, nil, fmt.Errorf("-dir %s: not a directory", c.dir)
	}
	var lim rl.Limiter
	var release func()
	if c.sidecar != "" {
		// The app fails open: when the sidecar cannot answer, requests are
		// served (the client's fail mode, the one place that decides it).
		cl, err := client.New(client.Config{URL: c.sidecar, Clock: c.clock, Timeout: c.timeout, FailMode: rl.FailOpen,
			OnDegraded: func(e rl.DegradedEvent) { log.Warn("rate limiter unavailable; request let through", "err", e.Err) }})
		if err != nil {
			return nil, nil, err
		}
		lim, release = cl, func() { cl.Close() }
	} else {
		m := memory.New(memory.Config{Clock: c.clock, Logger: log})
		lim, release = m, func() { m.Close() }
	}
	var proxies []string
	if c.proxies != "" {
		proxies = strings.Split(c.proxies, ",")
	}
	mw, err := nethttp.New(middleware.Config{
		Limiter:        lim,
		Policy:         rl.Request{Scale: c.scale, Limit: c.limit},
		TrustedProxies: proxies,
		OnError:        func(err error) { log.Warn("rate limiter failed", "err", err) },
	}, nil)
	if err != nil {
		release()
		return nil, nil, err
	}
	return mw(http.FileServer(http.Dir(c.dir))), release, nil
}

// run serves until ctx ends. If ready is not nil it receives the address
// served on.
func run(ctx context.Context, args []string, out io.Writer, ready chan<- string) error {
	c, err := parseFlags(args, out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{err}
	}
	log := slog.New(slog.NewTextHandler(out, nil))
	h, release, err := newApp(c, log)
	if err != nil {
		return err
	}
	defer release()
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return err
	}
	limiter := "embedded"
	if c.sidecar != "" {
		limiter = "sidecar " + c.sidecar
	}
	log.Info("serving", "addr", ln.Addr().String(), "dir", c.dir, "limit", c.limit, "per", c.scale, "limiter", limiter)
	if ready != nil {
		ready <- ln.Addr().String()
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	<-done
	return nil
}
