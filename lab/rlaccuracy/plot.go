package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// plotWindows is how many windows of the trace the plot shows.
const plotWindows = 13

var plotColors = map[string]string{
	"fixed":     "#d62728",
	"sliding":   "#1f77b4",
	"token":     "#2ca02c",
	"log":       "#555555",
	"slices 10": "#9467bd",
	"slices 60": "#ff7f0e",
}

// writePlot draws, per algorithm, the requests allowed in the last scale ms
// as a multiple of the limit, against time: the allowed rate.
func writePlot(path string, tr *trace, res []result) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if err := drawPlot(f, tr, res); err != nil {
		f.Close()
		return fmt.Errorf("plot: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

func drawPlot(w io.Writer, tr *trace, res []result) error {
	const (
		width, height = 900, 420
		left, right   = 70, 170
		top, bottom   = 40, 50
		yMax          = 2.2
		step          = 5 // ms between samples
	)
	span := min(plotWindows*tr.scale, tr.end-tr.start)
	pw, ph := float64(width-left-right), float64(height-top-bottom)
	x := func(t int64) float64 { return float64(left) + pw*float64(t-tr.start)/float64(span) }
	y := func(v float64) float64 { return float64(top) + ph*(1-v/yMax) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14">Boundary attack: allowed in the last %d ms, as a multiple of the limit (%d)</text>`+"\n", left, tr.scale, tr.limit)
	// Grid and axes.
	for _, v := range []float64{0, 0.5, 1, 1.5, 2} {
		stroke, dash := "#dddddd", ""
		if v == 1 {
			stroke, dash = "#888888", ` stroke-dasharray="4 3"`
		}
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"%s/>`+"\n", left, y(v), float64(left)+pw, y(v), stroke, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.1fx</text>`+"\n", left-8, y(v)+4, v)
	}
	for t := tr.start; t <= tr.start+span; t += tr.scale {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eeeeee"/>`+"\n", x(t), y(0), x(t), y(yMax))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%d</text>`+"\n", x(t), y(0)+16, (t-tr.start)/1000)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">time (s); window boundaries every %d ms</text>`+"\n", float64(left)+pw/2, height-10, tr.scale)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%.1f" fill="none" stroke="black"/>`+"\n", left, top, pw, ph)

	i := 0
	for _, r := range res {
		if r.times == nil {
			continue // not a limiter: Cloudflare's measure of the estimate
		}
		times := r.times
		var pts []string
		for t := tr.start; t <= tr.start+span; t += step {
			// allowed in (t-scale, t]
			hi := sort.Search(len(times), func(k int) bool { return times[k] > t })
			lo := sort.Search(len(times), func(k int) bool { return times[k] > t-tr.scale })
			v := float64(hi-lo) / float64(tr.limit)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(t), y(v)))
		}
		dash := ""
		if r.name == logName {
			dash = ` stroke-dasharray="6 3"`
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6"%s points="%s"/>`+"\n", plotColors[r.name], dash, strings.Join(pts, " "))
		ly := top + 20 + 22*i
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="3"%s/>`+"\n", float64(left)+pw+12, ly, float64(left)+pw+36, ly, plotColors[r.name], dash)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s (max %.2fx)</text>`+"\n", float64(left)+pw+42, ly+4, r.name, float64(r.maxWindow)/float64(tr.limit))
		i++
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
