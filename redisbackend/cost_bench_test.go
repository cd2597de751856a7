package redisbackend_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/redisbackend"
)

// costSubject is one workload whose cost to Redis BenchmarkRedisCost
// measures.
type costSubject struct {
	name string
	// top are the commands the workload sends itself: their usec add up to
	// what a check costs (a script's includes the commands it calls, which
	// INFO also counts under their own names, so those are not added).
	top []string
	// run sends n checks (or commands) over ids, from several goroutines.
	run func(ctx context.Context, n int) error
}

// costChecks is how many checks each subject sends per round.
const costChecks = 100_000

// BenchmarkRedisCost measures what one check costs Redis, per algorithm (the
// sliding window counters at 60 slices, the leaky bucket with a queue), with
// and without Config.Deadlines, beside one INCRBY and a pipelined
// INCRBY+PEXPIRE, in the same run: for
// each round (b.N rounds) and subject in turn, INCRBY's run and then the
// subject's, each after CONFIG RESETSTAT: the subject's
// checks (batches of 100 from 4 goroutines over 10,000 ids, every record
// created beforehand so that the steady state is measured), then INFO
// commandstats. The cold subjects send each check for a new id, so that
// every check is an id's first (its record created, its kind perhaps
// listed: kinds.go); evalsha-empty is a script that only returns, called
// as a check script is, what EVALSHA costs before a script's body. It
// reports, per subject, the medians over the rounds of:
// Redis µs per check (the usec of the commands the subject sends, over its
// checks), that divided by INCRBY's usec_per_call in the run just before, and
// the CPU Redis's main thread used per check (INFO cpu: parsing, replies and
// the event loop besides the commands) divided by INCRBY's; and for a cold
// subject, its CPU per check over its warm one's (run before it, with an
// INCRBY between) in the same round.
// lab/scripts/redis-bench.sh runs it on a Redis pinned to its own core.
func BenchmarkRedisCost(b *testing.B) {
	url := benchURL(b)
	ctx := context.Background()
	opt, err := rueidis.ParseURL(url)
	require.NoError(b, err)
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	require.NoError(b, err)
	defer c.Close()

	backend := func(name string, cfg redisbackend.Config) *redisbackend.Backend {
		cfg.URL, cfg.Prefix, cfg.Timeout, cfg.DenyCache = url, "cost"+name, 10*time.Second, -1
		be, err := redisbackend.New(cfg)
		require.NoError(b, err)
		b.Cleanup(func() { be.Close() })
		return be
	}
	var coldRuns int // cold subjects' runs so far: each run's ids are new
	checksOf := func(be *redisbackend.Backend, a rl.Algo, limit int64, cold bool) func(context.Context, int) error {
		return func(ctx context.Context, n int) error {
			prefix := "id"
			if cold {
				coldRuns++
				prefix = "c" + strconv.Itoa(coldRuns) + "-"
			}
			return spread(n, 100, func(first int) error {
				rs := make([]rl.Request, 100)
				for i := range rs {
					id := prefix + strconv.Itoa((first+i)%benchIDs)
					if cold {
						id = prefix + strconv.Itoa(first+i)
					}
					rs[i] = rl.Request{ID: id, Scale: time.Minute, Limit: limit, Hits: 1, Algo: a}
					switch a {
					case rl.Slices:
						rs[i].Slices = 60 // a slice a second
					case rl.Leaky:
						rs[i].Queue = 1000 // checks wait their turn
					}
				}
				_, err := be.CheckRates(ctx, rs)
				return err
			})
		}
	}
	checks := func(be *redisbackend.Backend, a rl.Algo, limit int64) func(context.Context, int) error {
		return checksOf(be, a, limit, false)
	}
	cold := func(be *redisbackend.Backend, a rl.Algo, limit int64) func(context.Context, int) error {
		return checksOf(be, a, limit, true)
	}
	// empty is a script that only returns, called as a check script is
	// (one key, the six packed arguments): what EVALSHA costs before a
	// script's body.
	sum := sha1.Sum([]byte("return 0"))
	emptySHA := hex.EncodeToString(sum[:])
	packed := strings.Repeat("\x00", 48)
	plain := func(build func(key string) rueidis.Commands) func(context.Context, int) error {
		return func(ctx context.Context, n int) error {
			return spread(n, 100, func(first int) error {
				var cmds rueidis.Commands
				for i := range 100 {
					cmds = append(cmds, build("cost:{"+strconv.Itoa((first+i)%benchIDs)+"}")...)
				}
				for _, r := range c.DoMulti(ctx, cmds...) {
					if err := r.Error(); err != nil {
						return err
					}
				}
				return nil
			})
		}
	}
	subjects := []costSubject{
		{"INCRBY", []string{"incrby"}, plain(func(k string) rueidis.Commands {
			return rueidis.Commands{c.B().Incrby().Key(k).Increment(1).Build()}
		})},
		{"INCRBY+PEXPIRE", []string{"incrby", "pexpire"}, plain(func(k string) rueidis.Commands {
			return rueidis.Commands{c.B().Incrby().Key(k).Increment(1).Build(), c.B().Pexpire().Key(k).Milliseconds(60_000).Build()}
		})},
		{"evalsha-empty", []string{"evalsha"}, plain(func(k string) rueidis.Commands {
			return rueidis.Commands{c.B().Evalsha().Sha1(emptySHA).Numkeys(1).Key(k).Arg(packed).Build()}
		})},
		{"fixed", []string{"set", "incrby", "evalsha"}, checks(backend("f", redisbackend.Config{}), rl.Fixed, 1e9)},
		{"fixed-cold", []string{"set", "incrby", "evalsha"}, cold(backend("fc", redisbackend.Config{}), rl.Fixed, 1e9)},
		{"sliding", []string{"evalsha"}, checks(backend("s", redisbackend.Config{}), rl.Sliding, 1e9)},
		{"sliding-cold", []string{"evalsha"}, cold(backend("sc", redisbackend.Config{}), rl.Sliding, 1e9)},
		{"token", []string{"evalsha"}, checks(backend("t", redisbackend.Config{}), rl.Token, 1e9)},
		{"token-cold", []string{"evalsha"}, cold(backend("tc", redisbackend.Config{}), rl.Token, 1e9)},
		{"log", []string{"evalsha"}, checks(backend("l", redisbackend.Config{}), rl.Log, check.MaxLogLimit)},
		{"log-cold", []string{"evalsha"}, cold(backend("lc", redisbackend.Config{}), rl.Log, check.MaxLogLimit)},
		{"slices", []string{"evalsha"}, checks(backend("n", redisbackend.Config{}), rl.Slices, 1e9)},
		{"slices-cold", []string{"evalsha"}, cold(backend("nc", redisbackend.Config{}), rl.Slices, 1e9)},
		{"leaky", []string{"evalsha"}, checks(backend("k", redisbackend.Config{}), rl.Leaky, 1e9)},
		{"leaky-cold", []string{"evalsha"}, cold(backend("kc", redisbackend.Config{}), rl.Leaky, 1e9)},
		{"fixed-deadlines", []string{"evalsha"}, checks(backend("fd", redisbackend.Config{Deadlines: true}), rl.Fixed, 1e9)},
		{"sliding-deadlines", []string{"evalsha"}, checks(backend("sd", redisbackend.Config{Deadlines: true}), rl.Sliding, 1e9)},
		{"token-deadlines", []string{"evalsha"}, checks(backend("td", redisbackend.Config{Deadlines: true}), rl.Token, 1e9)},
		{"log-deadlines", []string{"evalsha"}, checks(backend("ld", redisbackend.Config{Deadlines: true}), rl.Log, check.MaxLogLimit)},
		{"slices-deadlines", []string{"evalsha"}, checks(backend("nd", redisbackend.Config{Deadlines: true}), rl.Slices, 1e9)},
		{"leaky-deadlines", []string{"evalsha"}, checks(backend("kd", redisbackend.Config{Deadlines: true}), rl.Leaky, 1e9)},
	}
	if only := os.Getenv("REDISBACKEND_COST_ONLY"); only != "" {
		subjects = slices.DeleteFunc(subjects, func(s costSubject) bool {
			return s.name != "INCRBY" && !slices.Contains(strings.Split(only, ","), s.name)
		})
	}
	require.NoError(b, c.Do(ctx, c.B().ScriptLoad().Script("return 0").Build()).Error())
	// Every record exists before the rounds: they measure the steady state,
	// not the first check of a window (but for the cold subjects, whose
	// every check is an id's first).
	for _, s := range subjects {
		require.NoError(b, s.run(ctx, benchIDs), s.name)
	}
	us := map[string][]float64{}    // Redis µs per check
	ratio := map[string][]float64{} // over INCRBY's usec_per_call
	cpu := map[string][]float64{}   // Redis CPU per check over INCRBY's
	b.ResetTimer()
	// measure runs s once: Redis µs and main-thread CPU µs per check.
	measure := func(s costSubject) (perCheck, perCPU float64) {
		require.NoError(b, c.Do(ctx, c.B().ConfigResetstat().Build()).Error())
		t0 := redisCPU(b, c)
		require.NoError(b, s.run(ctx, costChecks), s.name)
		t1 := redisCPU(b, c)
		info, err := c.Do(ctx, c.B().Info().Section("commandstats").Build()).ToString()
		require.NoError(b, err)
		stats := commandStats(info)
		var usec float64
		for _, cmd := range s.top {
			usec += stats[cmd]
		}
		return usec / costChecks, (t1 - t0) / costChecks
	}
	raw := map[string][]float64{} // Redis CPU per check
	for range b.N {
		for _, s := range subjects {
			// Each subject beside an INCRBY run just before it: the
			// machine's load drifts less between the two.
			incr, incrCPU := measure(subjects[0])
			perCheck, perCPU := incr, incrCPU
			if s.name != "INCRBY" {
				perCheck, perCPU = measure(s)
			}
			us[s.name] = append(us[s.name], perCheck)
			ratio[s.name] = append(ratio[s.name], perCheck/incr)
			cpu[s.name] = append(cpu[s.name], perCPU/incrCPU)
			raw[s.name] = append(raw[s.name], perCPU)
		}
	}
	b.StopTimer()
	// A cold subject's CPU over its warm one's, round by round.
	for _, s := range subjects {
		warm, ok := strings.CutSuffix(s.name, "-cold")
		if !ok || len(raw[warm]) != len(raw[s.name]) {
			continue
		}
		var xs []float64
		for i := range raw[s.name] {
			xs = append(xs, raw[s.name][i]/raw[warm][i])
		}
		b.ReportMetric(median(xs), s.name+"-cpu-x-warm")
		b.Logf("%-22s cpu %5.2f × warm (ratios %v)", s.name, median(xs), fmtRatios(xs))
	}
	for _, s := range subjects {
		name := strings.ToLower(s.name)
		b.ReportMetric(median(us[s.name]), name+"-µs/check")
		b.ReportMetric(median(ratio[s.name]), name+"-x-incrby")
		if len(cpu[s.name]) > 0 {
			b.ReportMetric(median(cpu[s.name]), name+"-cpu-x-incrby")
		}
		b.Logf("%-22s %6.2f µs/check  %5.2f × INCRBY  cpu %5.2f × INCRBY  (ratios %v)", s.name,
			median(us[s.name]), median(ratio[s.name]), median(cpu[s.name]), fmtRatios(ratio[s.name]))
	}
}

// spread sends n items, per batches of size, from 4 goroutines; send gets
// the number of a batch's first item.
func spread(n, size int, send func(first int) error) error {
	const workers = 4
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			for first := w * size; first < n; first += workers * size {
				if err := send(first); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

var cmdstatRE = regexp.MustCompile(`cmdstat_(\w+):calls=(\d+),usec=(\d+)`)

// commandStats reads the usec of every command from INFO commandstats.
func commandStats(info string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range cmdstatRE.FindAllStringSubmatch(info, -1) {
		usec, _ := strconv.ParseFloat(m[3], 64)
		out[m[1]] = usec
	}
	return out
}

var cpuRE = regexp.MustCompile(`used_cpu_(?:sys|user)_main_thread:([0-9.]+)`)

// redisCPU is the CPU time, in µs, Redis's main thread (where commands and
// scripts run) has used so far, from INFO cpu.
func redisCPU(b *testing.B, c rueidis.Client) float64 {
	info, err := c.Do(context.Background(), c.B().Info().Section("cpu").Build()).ToString()
	require.NoError(b, err)
	var s float64
	for _, m := range cpuRE.FindAllStringSubmatch(info, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		s += v
	}
	return s * 1e6
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtRatios(xs []float64) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("%.2f", x))
	}
	return strings.Join(parts, " ")
}
