package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"

	rl "github.com/raterlimiter/raterlimiter"
)

// limitPoint is every algorithm's wrong-decision share at one limit.
type limitPoint struct {
	limit int64
	wrong map[string]float64 // percent, by algorithm
}

// sweepLimits replays the many-sources trace once per limit of o.limits,
// each from the same seed, prints a table of the wrong-decision share per
// algorithm, and draws it to o.limitsSVG.
func sweepLimits(ctx context.Context, o options, scaled func(int64) int64, w io.Writer, bar *progress) error {
	fmt.Fprintf(w, "rlaccuracy -seed %d -sources %d -size %g -limits-svg %s\n\n", o.seed, o.sources, o.size, o.limitsSVG)
	fmt.Fprintf(w, "Wrong decisions on the many-sources trace, by limit per minute.\n\n| limit |")
	for _, v := range variants {
		fmt.Fprintf(w, " %s |", v.name)
	}
	fmt.Fprintf(w, "\n|---:|%s\n", strings.Repeat("---:|", len(variants)))
	var pts []limitPoint
	for _, limit := range o.limits {
		rng := rand.New(rand.NewPCG(o.seed, 0xacc))
		tr := manySources(rng, o.sources, scaled(10), limit, 0.2, 1.2, 10)
		bar.label(fmt.Sprintf("many sources, limit %d", limit))
		var canceled error
		res := replayAll(&tr, false, false, func() {
			if canceled == nil && bar.add(1) {
				canceled = ctx.Err()
			}
		})
		if canceled != nil {
			return canceled
		}
		p := limitPoint{limit: limit, wrong: map[string]float64{}}
		fmt.Fprintf(w, "| %d |", limit)
		for _, r := range res[:len(variants)] {
			p.wrong[r.name] = 100 * float64(r.wrong()) / float64(max(1, r.requests))
			fmt.Fprintf(w, " %.4f %% |", p.wrong[r.name])
		}
		fmt.Fprintln(w)
		pts = append(pts, p)
	}
	f, err := os.Create(o.limitsSVG)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	drawLimits(f, pts)
	if err := f.Close(); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return ctx.Err()
}

// drawLimits draws the wrong-decision share (linear) against the limit
// (logarithmic), one line per algorithm.
func drawLimits(w io.Writer, pts []limitPoint) {
	const (
		width, height = 760, 400
		left, right   = 70, 130
		top, bottom   = 40, 50
	)
	pw, ph := float64(width-left-right), float64(height-top-bottom)
	lo, hi := math.Log10(float64(pts[0].limit)), math.Log10(float64(pts[len(pts)-1].limit))
	if hi == lo {
		hi = lo + 1
	}
	yMax := 1.0
	for _, p := range pts {
		for _, v := range p.wrong {
			yMax = max(yMax, v)
		}
	}
	yMax = math.Ceil(yMax/2) * 2
	x := func(limit int64) float64 { return float64(left) + pw*(math.Log10(float64(limit))-lo)/(hi-lo) }
	y := func(v float64) float64 { return float64(top) + ph*(1-v/yMax) }
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(w, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(w, `<text x="%d" y="22" font-size="14">Wrong decisions against an exact log, many sources, by limit per minute</text>`+"\n", left)
	for v := 0.0; v <= yMax; v += yMax / 4 {
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#dddddd"/>`+"\n", left, y(v), float64(left)+pw, y(v))
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">%.1f %%</text>`+"\n", left-8, y(v)+4, v)
	}
	for _, p := range pts {
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x(p.limit), y(0)+16, p.limit)
	}
	fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle">limit per minute (log scale)</text>`+"\n", float64(left)+pw/2, height-10)
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="none" stroke="black"/>`+"\n", left, top, pw, ph)
	for i, v := range variants {
		var xy []string
		for _, p := range pts {
			xy = append(xy, fmt.Sprintf("%.1f,%.1f", x(p.limit), y(p.wrong[v.name])))
		}
		color := plotColors[v.name]
		dash := ""
		if v.algo == rl.Log {
			dash = ` stroke-dasharray="6 3"` // on the axis: it makes no wrong decision
		}
		fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", color, dash, strings.Join(xy, " "))
		for _, p := range pts {
			fmt.Fprintf(w, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(p.limit), y(p.wrong[v.name]), color)
		}
		ly := top + 20 + 22*i
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", float64(left)+pw+12, ly, float64(left)+pw+36, ly, color)
		fmt.Fprintf(w, `<text x="%.1f" y="%d">%s</text>`+"\n", float64(left)+pw+42, ly+4, v.name)
	}
	fmt.Fprintln(w, "</svg>")
}
