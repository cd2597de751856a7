package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the dashboard's screenshot to docs/dashboard.png")

// traffic sends checks to the sidecar at base, for id, from a goroutine
// until stop is called (at most a minute), limit per minute each.
func traffic(t *testing.T, base, id string, limit int, pause time.Duration) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	hc := &http.Client{Timeout: 5 * time.Second}
	wg.Go(func() {
		end := time.Now().Add(time.Minute)
		for time.Now().Before(end) {
			select {
			case <-done:
				return
			default:
			}
			resp, err := hc.Get(base + "/check_rate?id=" + id + "&scale=60000&limit=" + strconv.Itoa(limit))
			if err == nil {
				resp.Body.Close()
			}
			time.Sleep(pause)
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// TestE2EDashboardInChromium drives the dashboard in a real headless
// Chromium: after real traffic it shows the hottest id and non-zero rates,
// follows a change of traffic, and logs no console errors.
func TestE2EDashboardInChromium(t *testing.T) {
	browser := tooltest.Need(t, "chromium", "chromium")
	s := start(t, nil, "-admin-token", "tok3n", "-sweep-interval", "200ms")

	stopHot := traffic(t, s.base, "hot-user", 1000000, time.Millisecond)
	defer stopHot()
	stopWarm := traffic(t, s.base, "warm-user", 1000000, 10*time.Millisecond)
	defer stopWarm()

	opts := append(chromedp.DefaultExecAllocatorOptions[:0:0],
		chromedp.ExecPath(browser),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()

	// The first Run starts the browser; its context must carry no timeout.
	_, err := chromedp.Run(ctx, chromedp.Navigate("about:blank"))
	require.NoError(t, err)
	var mu sync.Mutex
	var consoleErrors []string
	messages := chromedp.Console(ctx)
	var listening sync.WaitGroup
	listening.Go(func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type != chromedp.ConsoleError && !m.IsException() {
				continue
			}
			// The page's first fetch of the data meets 401 by design: it is
			// how the page learns to ask for the token.
			if m.Source == "network" && strings.Contains(m.Text, "401") {
				continue
			}
			mu.Lock()
			consoleErrors = append(consoleErrors, m.String())
			mu.Unlock()
		}
	})
	tctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	defer cancelT()

	// The page asks for the token (the data answered 401), and sends it as
	// a header once given: the URL never holds it.
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(s.base+"/dashboard"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), "tok3n"),
		chromedp.Click(chromedp.ID("go")),
	))

	eval := func(js string) string {
		v, err := chromedp.Run(tctx, chromedp.Evaluate[string](js))
		require.NoError(t, err)
		return v
	}
	firstKey := func(table string) string {
		return eval(`(() => { const c = document.querySelector("#` + table + ` tr:nth-child(2) td.key"); return c ? c.textContent : ""; })()`)
	}
	text := func(id string) string { return eval(`document.getElementById("` + id + `").textContent`) }
	rate := func(id string) float64 {
		v, err := strconv.ParseFloat(strings.ReplaceAll(text(id), ",", ""), 64)
		require.NoError(t, err)
		return v
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("the page did not show %s within 30 s:\n%s", what, eval(`document.querySelector("main").outerHTML`))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitFor("hot-user first with non-zero checks/s", func() bool {
		return firstKey("top-ids") == "hot-user" && rate("rate-checks") > 0
	})
	assert.Equal(t, "0", text("rate-denied"), "nothing denied yet")

	// Traffic changes: hot-user stops; a new id floods past its limit.
	stopHot()
	stopWarm()
	stopFlood := traffic(t, s.base, "flood-user", 5, time.Millisecond)
	defer stopFlood()
	waitFor("flood-user first in denials with non-zero denied/s", func() bool {
		return firstKey("top-ids-denied") == "flood-user" && rate("rate-denied") > 0
	})
	assert.Equal(t, "up", text("state"))
	assert.Equal(t, "memory", text("backend"))
	shot, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.True(t, len(shot) > 1000, "a PNG of the page")
	if *updateScreenshot {
		require.NoError(t, os.WriteFile("../../docs/dashboard.png", shot, 0o644))
	}
	cancel() // ends the browser and the console's iterator
	listening.Wait()

	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, consoleErrors, "console errors: %s", fmt.Sprint(consoleErrors))
}
