// Command rlaccuracy measures what each raterlimiter algorithm lets through.
//
// It replays synthetic traces (steady Poisson traffic under and over the
// limit, on/off bursts, a boundary attack, and many sources with
// heavy-tailed rates) against the fixed window, the sliding window and GCRA,
// each through a memory.Store (one shard of the embedded limiter, at the
// trace's times), and judges every decision against an exact sliding log: a request is rightly allowed
// iff the requests the same algorithm allowed to that source in the last
// scale ms, counted exactly, leave room for it. It prints, per trace and
// algorithm, the share of wrong decisions, the false allows and false
// denies, the most requests of one source allowed in any window of length
// scale (as a multiple of the limit), how close the traffic came to GCRA's
// bound, and for GCRA the decisions that differ from GCRA in exact
// rationals, the time per check and the memory per source. With -svg it
// draws the boundary attack; with -limits-svg it replays the many-sources
// trace at several limits and draws each algorithm's wrong-decision share
// against the limit.
//
// Usage:
//
//	rlaccuracy [-seed N] [-sources N] [-limit N] [-size F] [-svg FILE] [-limits-svg FILE] [-limits L,L,...] [-progress]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/cli"
	"github.com/raterlimiter/raterlimiter/lab/internal/term"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.ExitCode("rlaccuracy", err, os.Stderr))
}

// options are the command's flags.
type options struct {
	seed     uint64
	sources  int
	limit    int64
	size     float64
	svg      string
	progress bool
	// limitsSVG, if set, is where the wrong-decision share against the
	// limit is drawn, for the limits in limits.
	limitsSVG string
	limits    []int64
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("rlaccuracy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the traces")
	fs.IntVar(&o.sources, "sources", 100_000, "sources in the many-sources trace")
	fs.Int64Var(&o.limit, "limit", 90, "limit per minute of the many-sources trace")
	fs.Float64Var(&o.size, "size", 1, "scales the length of every trace (0.01 for a quick look)")
	fs.StringVar(&o.svg, "svg", "", "write the boundary attack's plot to this SVG file")
	fs.BoolVar(&o.progress, "progress", false, "show a progress bar on stderr even when it is not a terminal")
	fs.StringVar(&o.limitsSVG, "limits-svg", "", "replay the many-sources trace at each of -limits and draw the wrong-decision share per algorithm to this SVG file")
	limits := fs.String("limits", "10,30,90,300,900", "limits per minute for -limits-svg, comma-separated")
	if err := cli.Parse(fs, args); err != nil {
		return o, err
	}
	for _, f := range strings.Split(*limits, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || n < 1 || n > 1_000_000 {
			return o, cli.Usagef("-limits must be limits from 1 to 1000000 separated by commas, not %q", *limits)
		}
		o.limits = append(o.limits, n)
	}
	if o.sources < 1 || o.sources > 1<<30 {
		return o, cli.Usagef("-sources must be from 1 to %d", 1<<30)
	}
	if o.limit < 1 || o.limit > 1_000_000 {
		return o, cli.Usagef("-limit must be from 1 to 1000000")
	}
	if !(o.size > 0 && o.size <= 100) {
		return o, cli.Usagef("-size must be above 0 and at most 100")
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	scaled := func(n int64) int64 { return max(1, int64(float64(n)*o.size)) }
	rng := rand.New(rand.NewPCG(o.seed, 0xacc))
	traces := []trace{
		steady(rng, "steady Poisson under the limit (0.8x)", 100, 0.8, scaled(100)),
		steady(rng, "steady Poisson over the limit (1.5x)", 100, 1.5, scaled(60)),
		onOff(rng, 100, scaled(100)),
		boundary(scaled(25)),
		manySources(rng, o.sources, scaled(10), o.limit, 0.2, 1.2, 10),
	}
	traces[0].about = "100 sources, each Poisson at 80 % of the limit"
	traces[1].about = "100 sources, each Poisson at 150 % of the limit"
	traces[2].about = "100 sources, bursts at 4x the limit for 0.1-1 window, silent 0.5-3 windows"
	traces[3].about = "1 source: the limit in the last 50 ms of a window and again in the first 50 ms of the next, every 4 windows"
	traces[4].about = fmt.Sprintf("%d sources, rates Pareto (alpha 1.2, from 0.2/min) capped at 10x the limit, wandering 2x each minute", o.sources)

	var total int64
	for _, tr := range traces {
		total += int64(len(tr.events)) * int64(len(variants)+3) // the rows replay adds up
	}
	bar := newProgress(stderr, total, o.progress || term.IsTerminal(stderr))
	defer bar.done()

	if o.limitsSVG != "" {
		return sweepLimits(ctx, o, scaled, stdout, bar)
	}
	fmt.Fprintf(stdout, "rlaccuracy -seed %d -sources %d -limit %d -size %g\n\n", o.seed, o.sources, o.limit, o.size)
	fmt.Fprintf(stdout, "seed %d. A decision is wrong when it differs from an exact sliding log of the\n", o.seed)
	fmt.Fprintf(stdout, "requests the same algorithm allowed to that source in the last scale ms.\n")
	for i := range traces {
		tr := &traces[i]
		plot := i == 3 && o.svg != ""
		var res []result
		var canceled error
		bar.label(tr.name)
		res = replay(tr, plot, func() {
			if canceled == nil && bar.add(1) {
				canceled = ctx.Err()
			}
		})
		if canceled != nil {
			return canceled
		}
		report(stdout, tr, res)
		if plot {
			if err := writePlot(o.svg, tr, res); err != nil {
				return err
			}
		}
	}
	return ctx.Err()
}

// report prints one trace's table.
func report(w io.Writer, tr *trace, res []result) {
	fmt.Fprintf(w, "\n## %s\n\n%s; limit %d per %d ms; %d requests over %s.\n\n",
		tr.name, tr.about, tr.limit, tr.scale, len(tr.events), time.Duration(tr.end-tr.start)*time.Millisecond)
	overIDs, overReqs := tr.overShare()
	fmt.Fprintf(w, "%d of %d sources offer more than the limit in some window; they make %s of the requests.\n\n",
		overIDs, tr.ids, pct(overReqs, int64(len(tr.events))))
	fmt.Fprintln(w, "| algorithm | allowed | wrong decisions | false allows | false denies | wrong, sources within the limit | wrong, sources over it | most allowed in a window of scale | GCRA bound reached | differs from exact GCRA | ns per check | bytes per id |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range res {
		exact, most, bound, ns, bytes := "—", "—", "—", "—", "—"
		if r.nsPerCheck > 0 {
			ns = fmt.Sprintf("%.0f", r.nsPerCheck)
		}
		if r.bytesPerID > 0 {
			bytes = fmt.Sprintf("%.0f", r.bytesPerID)
		}
		if r.mismatches >= 0 {
			exact = fmt.Sprint(r.mismatches)
		}
		if r.name != estimateName {
			most = fmt.Sprintf("%.2fx", float64(r.maxWindow)/float64(tr.limit))
			bound = fmt.Sprintf("%.4f", r.bound)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %s |\n",
			r.name, pct(r.allowed, r.requests), pct(r.wrong(), r.requests), r.falseAllw, r.falseDeny,
			pctN(r.wrong()-r.overWrong, r.requests-r.overRequests), pctN(r.overWrong, r.overRequests),
			most, bound, exact, ns, bytes)
	}
}

// pct formats n/of as a percentage with four decimals.
func pct(n, of int64) string {
	if of == 0 {
		return "0 %"
	}
	return fmt.Sprintf("%.4f %%", 100*float64(n)/float64(of))
}

// pctN formats n/of as a percentage and the count.
func pctN(n, of int64) string {
	return fmt.Sprintf("%s (%d)", pct(n, of), n)
}

// progress draws a bar on w at most ten times a second.
type progress struct {
	w        io.Writer
	on       bool
	total    int64
	n        int64
	name     string
	last     time.Time
	lastShow int64
}

func newProgress(w io.Writer, total int64, on bool) *progress {
	return &progress{w: w, on: on, total: max(total, 1)}
}

func (p *progress) label(name string) { p.name = name }

// add counts n units of work; it reports true every 65536 units, when the
// caller may look at its context.
func (p *progress) add(n int64) bool {
	p.n += n
	if p.n-p.lastShow < 1<<16 {
		return false
	}
	p.lastShow = p.n
	if p.on {
		if now := time.Now(); now.Sub(p.last) >= 100*time.Millisecond {
			p.last = now
			p.draw()
		}
	}
	return true
}

func (p *progress) draw() {
	const width = 40
	n := min(p.n, p.total)
	filled := int(int64(width) * n / p.total)
	fmt.Fprintf(p.w, "\r[%s%s] %3d%% %-40s", strings.Repeat("#", filled), strings.Repeat(".", width-filled), 100*n/p.total, p.name)
}

func (p *progress) done() {
	if p.on {
		p.n = p.total
		p.draw()
		fmt.Fprintln(p.w)
	}
}
