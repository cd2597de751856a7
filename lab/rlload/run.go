package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/api"
	"github.com/raterlimiter/raterlimiter/client"
	"github.com/raterlimiter/raterlimiter/internal/check"
	msform "github.com/raterlimiter/raterlimiter/internal/millis"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/cli"
	"github.com/raterlimiter/raterlimiter/lab/internal/term"
	"github.com/raterlimiter/raterlimiter/memory"
)

// config is the parsed command line.
type config struct {
	url         string
	embedded    bool
	inproc      bool
	callers     int
	ids         int
	duration    time.Duration
	warmup      time.Duration
	batch       bool
	batchMax    int
	batchWindow time.Duration
	conns       int
	timeout     time.Duration
	algo        string
	scale       int64
	limit       int64
	hits        int64
	shards      int
	seed        uint64
	progress    bool
	cpuProfile  string
	maxErrors   float64 // percent of checks that may end in an error
	rls         string  // an Envoy RLS server's address: ShouldRateLimit instead of HTTP
	rlsDomain   string
	rlsKey      string
}

func (cfg *config) flags(fs *flag.FlagSet) {
	fs.StringVar(&cfg.url, "url", "http://127.0.0.1:8080", "the sidecar's base URL")
	fs.BoolVar(&cfg.embedded, "embedded", false, "drive the embedded limiter in this process instead of a sidecar")
	fs.BoolVar(&cfg.inproc, "inproc", false, "start a sidecar (the API on the embedded limiter) in this process on a loopback port and drive it over HTTP, so that one -cpuprofile shows both sides; -url is ignored")
	fs.IntVar(&cfg.callers, "c", 256, "concurrent callers, each making one check after another")
	fs.IntVar(&cfg.ids, "ids", 10000, "distinct ids the callers pick from at random (user-0, user-1, ...)")
	fs.DurationVar(&cfg.duration, "d", 10*time.Second, "how long to measure")
	fs.DurationVar(&cfg.warmup, "warmup", 0, "how long to run before measuring (connections, buckets)")
	fs.BoolVar(&cfg.batch, "batch", false, "use the client's batching mode (POST /check_rates)")
	fs.IntVar(&cfg.batchMax, "batch-max", 500, "most checks in one batch, with -batch; at most the sidecar's -max-batch (1000 by default)")
	fs.DurationVar(&cfg.batchWindow, "batch-window", 0, "how long a batch that may leave still waits for more checks; 0: none")
	fs.IntVar(&cfg.conns, "conns", 0, "most connections to the sidecar; 0: the client's default (256)")
	fs.DurationVar(&cfg.timeout, "timeout", time.Second, "bound on each check over HTTP")
	fs.StringVar(&cfg.algo, "algo", "fixed", "algorithm: fixed, sliding, token, log, slices (60 slices) or leaky (no queue)")
	fs.Int64Var(&cfg.scale, "scale", 60_000, "window of each check, in milliseconds")
	fs.Int64Var(&cfg.limit, "limit", 1_000_000_000, "limit of each check (the default lets every check through)")
	fs.Int64Var(&cfg.hits, "hits", 1, "hits of each check (0 peeks)")
	fs.IntVar(&cfg.shards, "shards", 0, "actors of the embedded limiter (-embedded, -inproc); 0: its default")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the callers' id choices")
	fs.BoolVar(&cfg.progress, "progress", false, "show progress on stderr even when it is not a terminal")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured run to this file")
	fs.StringVar(&cfg.rls, "rls", "", "drive an Envoy RLS server at this host:port over gRPC instead (one ShouldRateLimit call per check, one descriptor {-rls-key: id}, each with -timeout as its deadline; -conns connections, default 1); the server's configuration sets the limit")
	fs.StringVar(&cfg.rlsDomain, "rls-domain", "bench", "the RLS requests' domain (-rls)")
	fs.StringVar(&cfg.rlsKey, "rls-key", "user", "the descriptor entry's key (-rls); the id is its value")
	fs.Float64Var(&cfg.maxErrors, "max-errors", 1, "percent of checks that may end in an error (no decision) before rlload exits 1; 100: never")
}

// parse reads args into cfg and checks the values.
func (cfg *config) parse(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("rlload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: rlload [flags]\n\n"+
			"rlload drives a raterlimiter sidecar (or the embedded limiter) with concurrent callers and\n"+
			"prints one line: checks/s: N  p50: ...  p99: ...  errors: N\n\n")
		fs.PrintDefaults()
	}
	cfg.flags(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	switch {
	case cfg.callers < 1:
		return cli.Usagef("-c must be at least 1")
	case cfg.ids < 1:
		return cli.Usagef("-ids must be at least 1")
	case cfg.duration <= 0:
		return cli.Usagef("-d must be positive")
	case cfg.warmup < 0:
		return cli.Usagef("-warmup must not be negative")
	case cfg.embedded && cfg.inproc:
		return cli.Usagef("-embedded and -inproc exclude each other")
	case cfg.rls != "" && (cfg.embedded || cfg.inproc || cfg.batch):
		return cli.Usagef("-rls excludes -embedded, -inproc and -batch")
	case cfg.rls != "" && (cfg.rlsDomain == "" || cfg.rlsKey == ""):
		return cli.Usagef("-rls-domain and -rls-key must not be empty")
	case cfg.rls != "" && cfg.hits == 0:
		return cli.Usagef("-hits 0 peeks, and an RLS request cannot: its hits_addend 0 means 1")
	case cfg.embedded && cfg.batch:
		return cli.Usagef("-batch is the HTTP client's mode; -embedded has no HTTP")
	case !(cfg.maxErrors >= 0 && cfg.maxErrors <= 100):
		return cli.Usagef("-max-errors must be a percentage from 0 to 100, not %v", cfg.maxErrors)
	case cfg.batchMax < 0 || cfg.batchWindow < 0 || cfg.conns < 0 || cfg.shards < 0:
		return cli.Usagef("-batch-max, -batch-window, -conns and -shards must not be negative")
	}
	a, err := check.ParseAlgo(cfg.algo)
	if err != nil {
		return cli.Usagef("-algo: %v", err)
	}
	if err := check.ValidateWire(cfg.request("user-0", a), check.DefaultMaxIDBytes); err != nil {
		return cli.Usagef("%v", err)
	}
	return nil
}

func (cfg *config) request(id string, a rl.Algo) rl.Request {
	return rl.Request{ID: id, Scale: msform.Duration(cfg.scale), Limit: cfg.limit, Hits: cfg.hits, Peek: cfg.hits == 0, Algo: a}
}

// result is what a run measured.
type result struct {
	Checks  int64         // checks answered while measuring
	Errors  int64         // checks that got an error while measuring
	Elapsed time.Duration // the measured time
	Total   int64         // checks answered over the whole run, warm-up and stop included
	CPU     time.Duration // this process's CPU time while measuring
	P50     time.Duration // median latency per check
	P99     time.Duration
}

// rate returns checks per second.
func (r result) rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Checks) / r.Elapsed.Seconds()
}

// String is the summary line.
func (r result) String() string {
	return fmt.Sprintf("checks/s: %.0f  p50: %s  p99: %s  errors: %d", r.rate(), ms(r.P50), ms(r.P99), r.Errors)
}

// errorShare is the percentage of the measured checks that ended in an
// error; 0 when none ended.
func (r result) errorShare() float64 {
	if r.Checks+r.Errors == 0 {
		return 0
	}
	return 100 * float64(r.Errors) / float64(r.Checks+r.Errors)
}

// tooManyErrors is a run whose checks failed more often than -max-errors
// allows (exit status 1): a run against a sidecar that is down or refusing
// measures nothing, and a script must not take its figures for a result.
type tooManyErrors struct {
	share, max     float64
	errors, checks int64
}

func (e *tooManyErrors) Error() string {
	return fmt.Sprintf("%.2f %% of checks got no decision (%d of %d), more than -max-errors %g %%",
		e.share, e.errors, e.errors+e.checks, e.max)
}

// ms formats d in milliseconds with microsecond precision.
func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64) + "ms"
}

// run is the whole command: it parses args, drives the load, prints progress
// to stderr and the summary line to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg config
	if err := cfg.parse(args, stderr); err != nil {
		return err
	}
	res, err := load(ctx, &cfg, stderr)
	if err != nil {
		return err
	}
	line := res.String()
	var fail error
	if share := res.errorShare(); share > cfg.maxErrors {
		fail = &tooManyErrors{share: share, max: cfg.maxErrors, errors: res.Errors, checks: res.Checks}
		line += fmt.Sprintf("  FAILED: %.2f %% errors > -max-errors %g %%", share, cfg.maxErrors)
	}
	if _, err := fmt.Fprintln(stdout, line); err != nil {
		return err
	}
	return fail
}

// cpuTime returns the user and system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// caller is one caller's counters, on cache lines of its own: the progress
// reader loads them, only the caller stores them.
type caller struct {
	checks atomic.Int64
	errors atomic.Int64
	hist   histogram
	_      [64]byte
}

// checker is what the callers check: a Limiter, or the RLS checker.
type checker interface {
	CheckRate(ctx context.Context, r rl.Request) (rl.Decision, error)
}

// target builds what the callers check and returns it with its closer.
func target(cfg *config, stderr io.Writer) (checker, func(), error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if cfg.embedded {
		lim := memory.New(memory.Config{Shards: cfg.shards, Logger: quiet})
		return lim, func() { lim.Close() }, nil
	}
	if cfg.rls != "" {
		c, err := newRLSChecker(cfg.rls, cfg.rlsDomain, cfg.rlsKey, cfg.conns, cfg.timeout)
		if err != nil {
			return nil, nil, err
		}
		return c, c.Close, nil
	}
	url := cfg.url
	closeSidecar := func() {}
	if cfg.inproc {
		lim := memory.New(memory.Config{Shards: cfg.shards, Logger: quiet})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			lim.Close()
			return nil, nil, fmt.Errorf("rlload: in-process sidecar: %w", err)
		}
		srv := api.New(api.Config{Limiter: lim, Logger: quiet})
		served := make(chan struct{})
		go func() { defer close(served); _ = srv.Serve(ln) }()
		url = "http://" + ln.Addr().String()
		fmt.Fprintf(stderr, "rlload: in-process sidecar on %s\n", url)
		closeSidecar = func() {
			_ = srv.Shutdown(context.Background())
			<-served
			lim.Close()
		}
	}
	ccfg := client.Config{URL: url, Timeout: cfg.timeout, MaxConns: cfg.conns}
	if cfg.batch { // a positive size turns the client's batching on
		ccfg.BatchMaxSize, ccfg.BatchWindow = cmp.Or(cfg.batchMax, 500), cfg.batchWindow
	}
	c, err := client.New(ccfg)
	if err != nil {
		closeSidecar()
		return nil, nil, fmt.Errorf("rlload: %w", err)
	}
	return c, func() { c.Close(); closeSidecar() }, nil
}

// load runs the callers for the warm-up and the measured time, or until ctx
// ends, and returns what they measured.
func load(ctx context.Context, cfg *config, stderr io.Writer) (result, error) {
	chk, closeTarget, err := target(cfg, stderr)
	if err != nil {
		return result{}, err
	}
	defer closeTarget()
	a, _ := check.ParseAlgo(cfg.algo) // checked by parse
	ids := make([]string, cfg.ids)
	for i := range ids {
		ids[i] = "user-" + strconv.Itoa(i)
	}

	callers := make([]caller, cfg.callers)
	var (
		stop      atomic.Bool // the callers return
		measuring atomic.Bool // the callers record latencies
		firstErr  atomic.Pointer[error]
		wg        sync.WaitGroup
	)
	for i := range callers {
		cl := &callers[i]
		rng := rand.NewPCG(cfg.seed, uint64(i))
		n := uint64(len(ids))
		wg.Go(func() {
			bg := context.Background() // no per-check context: the tool stops by the flag
			// One clock reading per check: a check starts when the one
			// before it ended (the loop between them is part of neither).
			t0 := time.Now()
			for !stop.Load() {
				r := cfg.request(ids[rng.Uint64()%n], a)
				_, err := chk.CheckRate(bg, r)
				t1 := time.Now()
				if err != nil {
					if firstErr.Load() == nil {
						e := err // a copy: taking err's address would move it to the heap on every check
						firstErr.CompareAndSwap(nil, &e)
					}
					cl.errors.Add(1)
				} else {
					cl.checks.Add(1)
				}
				if measuring.Load() {
					cl.hist.record(t1.Sub(t0))
				}
				t0 = t1
			}
		})
	}
	totals := func() (checks, errs int64) {
		for i := range callers {
			checks += callers[i].checks.Load()
			errs += callers[i].errors.Load()
		}
		return checks, errs
	}
	finish := func() {
		stop.Store(true)
		wg.Wait()
	}

	if cfg.warmup > 0 {
		select {
		case <-time.After(cfg.warmup):
		case <-ctx.Done():
			finish()
			return result{}, ctx.Err()
		}
	}
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			finish()
			return result{}, fmt.Errorf("rlload: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			finish()
			return result{}, fmt.Errorf("rlload: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	measuring.Store(true)
	start := time.Now()
	cpu0 := cpuTime()
	checks0, errs0 := totals()
	progress := cfg.progress || term.IsTerminal(stderr)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	end := time.NewTimer(cfg.duration)
	defer end.Stop()
	lastChecks, lastAt := checks0, start
loop:
	for {
		select {
		case <-end.C:
			break loop
		case <-ctx.Done():
			break loop
		case now := <-tick.C:
			if !progress {
				continue
			}
			c, e := totals()
			fmt.Fprintf(stderr, "rlload: %5.0fs  checks/s: %.0f  errors: %d\n",
				now.Sub(start).Seconds(), float64(c-lastChecks)/now.Sub(lastAt).Seconds(), e-errs0)
			lastChecks, lastAt = c, now
		}
	}
	checks1, errs1 := totals()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	measuring.Store(false)
	finish()
	total, _ := totals()

	var h histogram
	for i := range callers {
		h.merge(&callers[i].hist)
	}
	res := result{
		Checks:  checks1 - checks0,
		Errors:  errs1 - errs0,
		Elapsed: elapsed,
		P50:     h.quantile(0.50),
		P99:     h.quantile(0.99),
		Total:   total,
		CPU:     cpu,
	}
	if p := firstErr.Load(); p != nil {
		fmt.Fprintf(stderr, "rlload: first error: %v\n", strings.TrimSpace((*p).Error()))
	}
	if progress {
		perCheck := "-"
		if res.Checks > 0 {
			perCheck = strconv.FormatFloat(float64(cpu)/float64(time.Microsecond)/float64(res.Checks), 'f', 3, 64)
		}
		fmt.Fprintf(stderr, "rlload: %d checks in %s by %d callers over %d ids (whole run: %d); this process's CPU: %s µs/check\n",
			res.Checks, elapsed.Round(time.Millisecond), cfg.callers, cfg.ids, res.Total, perCheck)
	}
	return res, nil
}
