package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/raterlimiter/raterlimiter/internal/bounds"
	"github.com/raterlimiter/raterlimiter/internal/defaults"

	"github.com/redis/rueidis"

	"github.com/raterlimiter/raterlimiter/internal/cli"
)

// maxIDBytesCap bounds -max-id-bytes: longer ids make no sense as keys, and
// the request buffer grows with them.
const maxIDBytesCap = 65536

// config is the parsed command line.
type config struct {
	listen          string
	sweepInterval   time.Duration
	backend         string
	redisURL        string
	redisTimeout    time.Duration
	redisFail       string
	redisDeadlines  bool
	redisDenyCache  int
	redisMaxScale   time.Duration
	adminToken      string
	maxIDBytes      int
	shards          int
	maxBuckets      int
	maxBucketBytes  int64
	maxScalesPerID  int
	timeout         time.Duration
	maxBatch        int
	shutdownTimeout time.Duration
	version         bool
	snap            snapshotFlags
	pol             policyFlags
	rls             rlsFlags
	exp             exposureFlags
	lis             listenFlags
	dash            dashboardFlags
	wait            waitFlags
	log             logFlags
	health          healthFlags
	watch           watchFlag
	peerNotes       []peerNote // envoyproxy/ratelimit's variables read (peerenv.go)
}

// flags declares every flag on fs, bound to cfg's fields.
func (cfg *config) flags(fs *flag.FlagSet) {
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:8080", "address to serve HTTP on (host:port; port 0 picks a free one), or unix:/path for a unix socket")
	fs.DurationVar(&cfg.sweepInterval, "sweep-interval", 10*time.Second, "how often stale buckets are removed (memory backend)")
	fs.StringVar(&cfg.backend, "backend", "memory", "where counters live: memory or redis")
	fs.StringVar(&cfg.redisURL, "redis-url", "redis://127.0.0.1:6379/0", "Redis address when -backend=redis")
	fs.DurationVar(&cfg.redisTimeout, "redis-timeout", defaults.RedisTimeout, "if set, a ceiling on one call's wait for Redis past which -redis-fail applies; 0: a call waits as long as -timeout allows, and only Redis refusing or answering nothing for 2s opens the circuit")
	fs.StringVar(&cfg.redisFail, "redis-fail", "closed", "when Redis does not answer: closed (503), open (allow) or local (this sidecar's own counters)")
	fs.BoolVar(&cfg.redisDeadlines, "redis-deadlines", false, "count no check that Redis runs after its caller's deadline, so a 503 never counts: the checks read Redis's clock, and fixed windows use a script; 1.2 to 1.4 (the scripts) and 2.3 (fixed) times the Redis CPU per check")
	fs.IntVar(&cfg.redisDenyCache, "redis-deny-cache", defaults.DenyCache, "how many ids' denials this sidecar keeps and answers itself, without Redis, until Redis would allow; 0 turns the cache off")
	fs.DurationVar(&cfg.redisMaxScale, "redis-max-scale", defaultRedisMaxScale, "longest scale a check that names its own may choose on the Redis backend, where a record lives as long as its scale (a longer one is refused with 400; a policy's scale is the operator's and not bound); at most 87600h")
	fs.StringVar(&cfg.adminToken, "admin-token", "", "bearer token /buckets requires; empty leaves /buckets open")
	fs.IntVar(&cfg.maxIDBytes, "max-id-bytes", bounds.DefaultMaxIDBytes, fmt.Sprintf("longest id accepted, in bytes (1 to %d)", maxIDBytesCap))
	fs.IntVar(&cfg.shards, "shards", 0, "actors the memory backend spreads ids over; 0 means half the CPUs, at least one")
	fs.IntVar(&cfg.maxBuckets, "max-buckets", defaults.MaxBuckets, "most live bucket records (memory backend); past it a new record evicts an expired or else the least recently modified one; 0 means no bound")
	fs.Int64Var(&cfg.maxBucketBytes, "max-bucket-bytes", defaults.MaxBucketBytes, "most bytes of live bucket records (memory backend): each counts 48 bytes and its id's, so long ids meet it before -max-buckets; past it a new record evicts as past -max-buckets; 0 means no bound")
	fs.IntVar(&cfg.maxScalesPerID, "max-scales-per-id", defaults.MaxScalesPerID, "most distinct scales one id may have records of (memory backend; with algo slices each slices count of a scale counts as one more); a check adding another is refused with 400; -1: no bound")
	fs.DurationVar(&cfg.timeout, "timeout", defaults.Timeout, "longest wait for the backend's answer before 503")
	fs.IntVar(&cfg.maxBatch, "max-batch", defaults.MaxBatch, "most checks in one POST /check_rates (more get 413)")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 10*time.Second, "longest wait for requests in flight on SIGINT/SIGTERM")
	fs.BoolVar(&cfg.version, "version", false, "print the version and exit")
	cfg.snap.register(fs)
	cfg.pol.register(fs)
	cfg.rls.register(fs)
	cfg.exp.register(fs)
	cfg.lis.register(fs)
	cfg.dash.register(fs)
	cfg.wait.register(fs)
	cfg.log.register(fs)
	cfg.health.register(fs)
	cfg.watch.register(fs)
}

// commandLineOnly are the flags that make the binary do something else than
// serve and exit. The environment cannot set them: a stray
// RATERLIMITER_VERSION=true in a deployment's environment would otherwise
// turn the sidecar into a program that prints its version and exits.
var commandLineOnly = map[string]bool{"version": true, "check-policies": true, "check-rls-config": true, "healthcheck": true, "healthcheck-timeout": true}

// envName is the environment variable that sets flag name, or "" for a
// flag only the command line sets.
func envName(name string) string { return environment(nil).Name(name) }

// testVariables start the names of the test suite's own RATERLIMITER_
// variables (CONTRIBUTING.md): they set no flag, and a sidecar started by
// the tests does not warn about them.
var testVariables = []string{"RATERLIMITER_REQUIRE_REDIS", "RATERLIMITER_SOAK", "RATERLIMITER_FLOOD", "RATERLIMITER_STALL_LOAD"}

// environment is lookup as the source of the flags the command line leaves
// unset: RATERLIMITER_<FLAG>, but for commandLineOnly.
func environment(lookup func(string) (string, bool)) *cli.Env {
	return &cli.Env{Prefix: "RATERLIMITER_", Lookup: lookup, CommandLineOnly: commandLineOnly, NotFlags: testVariables}
}

// envWarnings are the warnings the sidecar logs at start about variables
// of the process's environment that lookup sees and no flag reads: a
// misspelt RATERLIMITER_POLICY must not leave a sidecar without its rules
// and without a word.
func envWarnings(fs *flag.FlagSet, lookup func(string) (string, bool)) []string {
	return environment(lookup).Unknown(fs, os.Environ())
}

// checkListen refuses an address net.Listen could never listen on for a
// reason the command line alone shows (a port out of range, no port): a
// usage error, exit status 2, not a failure to serve.
func checkListen(name, addr string) error {
	if addr == "" || strings.HasPrefix(addr, unixPrefix) {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return cli.Usagef("-%s %q must be host:port (port 0 picks a free one) or unix:/path", name, addr)
	}
	if n, err := strconv.Atoi(port); err == nil && (n < 0 || n > 65535) || port == "" {
		return cli.Usagef("-%s %q: the port must be from 0 to 65535", name, addr)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return cli.Usagef("-%s %q: %q is not a port", name, addr, port)
	}
	return nil
}

// backendFlags are the flags that only one backend reads: the Redis
// backend's, and the memory backend's (which the Redis backend reads only
// for its own counters under -redis-fail local). A flag the chosen backend
// would ignore is refused, so that a setting never looks applied when it
// is not.
var backendFlags = map[string]string{
	"redis-url": "redis", "redis-timeout": "redis", "redis-fail": "redis", "redis-deadlines": "redis", "redis-deny-cache": "redis",
	"sweep-interval": "memory", "shards": "memory", "max-buckets": "memory", "max-scales-per-id": "memory",
	"max-bucket-bytes": "memory",
	"redis-max-scale":  "redis",
}

// parse reads args, then the environment for the flags args left unset.
func (cfg *config) parse(args []string, lookupEnv func(string) (string, bool)) (*flag.FlagSet, error) {
	fs := flag.NewFlagSet("raterlimiter", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.flags(fs)
	set, err := cli.Parse(fs, args, environment(lookupEnv))
	if err != nil {
		return fs, err
	}
	if cfg.peerNotes, err = applyPeerEnv(fs, set, lookupEnv, os.Environ()); err != nil {
		return fs, err
	}
	if err := cfg.check(); err != nil {
		return fs, err
	}
	return fs, cfg.checkBackendFlags(set)
}

// checkBackendFlags refuses a flag (set on the command line or in the
// environment) that the chosen backend would ignore.
func (cfg *config) checkBackendFlags(set map[string]bool) error {
	var names []string
	for name := range set {
		if backendFlags[name] != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		switch {
		case backendFlags[name] == "redis" && cfg.backend != "redis":
			return cli.Usagef("-%s applies only to -backend redis; with -backend %s it would do nothing", name, cfg.backend)
		case backendFlags[name] == "memory" && cfg.backend == "redis" && cfg.redisFail != "local":
			return cli.Usagef("-%s applies to -backend memory (and to -backend redis only with -redis-fail local); here it would do nothing", name)
		}
	}
	return nil
}

// check refuses values no flag type can refuse by itself.
func (cfg *config) check() error {
	bad := cli.Usagef
	switch {
	case cfg.backend != "memory" && cfg.backend != "redis":
		return bad("-backend must be memory or redis, not %q", cfg.backend)
	case cfg.maxIDBytes < 1 || cfg.maxIDBytes > maxIDBytesCap:
		return bad("-max-id-bytes must be from 1 to %d, not %d", maxIDBytesCap, cfg.maxIDBytes)
	case cfg.shards < 0:
		return bad("-shards must not be negative")
	case cfg.maxBuckets < 0:
		return bad("-max-buckets must not be negative")
	case cfg.maxBucketBytes < 0:
		return bad("-max-bucket-bytes must not be negative")
	case cfg.maxScalesPerID == 0 || cfg.maxScalesPerID < -1:
		return bad("-max-scales-per-id must be positive, or -1 for no bound")
	case cfg.redisTimeout < 0:
		return bad("-redis-timeout must not be negative")
	case cfg.redisDenyCache < 0:
		return bad("-redis-deny-cache must not be negative")
	case cfg.redisMaxScale < time.Millisecond || cfg.redisMaxScale > bounds.MaxScale:
		return bad("-redis-max-scale must be from 1ms to 87600h (10 years), not %v", cfg.redisMaxScale)
	case cfg.timeout <= 0:
		return bad("-timeout must be positive")
	case cfg.maxBatch < 1:
		return bad("-max-batch must be at least 1")
	case cfg.shutdownTimeout <= 0:
		return bad("-shutdown-timeout must be positive")
	case cfg.sweepInterval <= 0:
		return bad("-sweep-interval must be positive")
	case cfg.redisFail != "closed" && cfg.redisFail != "open" && cfg.redisFail != "local":
		return bad("-redis-fail must be closed, open or local, not %q", cfg.redisFail)
	}
	if err := checkListen("listen", cfg.listen); err != nil {
		return err
	}
	if err := checkListen("admin-listen", cfg.exp.adminListen); err != nil {
		return err
	}
	if err := checkListen("rls-listen", cfg.rls.listen); err != nil {
		return err
	}
	if cfg.backend == "redis" {
		if _, err := rueidis.ParseURL(cfg.redisURL); err != nil {
			return bad("invalid value %q for -redis-url: %v", cfg.redisURL, err)
		}
	}
	if err := cfg.pol.validate(); err != nil {
		return err
	}
	if err := cfg.rls.validate(); err != nil {
		return err
	}
	if _, err := cfg.exp.validate(cfg.adminToken); err != nil {
		return err
	}
	if err := cfg.lis.validate(); err != nil {
		return err
	}
	if err := cfg.wait.validate(); err != nil {
		return err
	}
	if err := cfg.log.validate(); err != nil {
		return err
	}
	if err := cfg.health.validate(); err != nil {
		return err
	}
	return cfg.snap.check(cfg.backend)
}

// usage writes the help text: every flag, its environment variable and its
// default, in the order they are declared.
func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: raterlimiter [flags]\n\n"+
		"raterlimiter serves check_rate(id, scale, limit) over HTTP next to an application.\n"+
		"Every flag can also be set by its environment variable; a flag on the command line wins.\n\n")
	for _, r := range flagRows(fs) {
		fmt.Fprintf(w, "  %s\n", strings.TrimSpace("-"+r.name+" "+r.arg))
		fmt.Fprintf(w, "        %s\n", r.usage)
		env := "env " + r.env
		if r.env == "" {
			env = "command line only"
		}
		fmt.Fprintf(w, "        %s, default %s\n", env, r.def)
	}
}

// flagRow is one flag as -h and docs/configuration.md's flag table show it.
type flagRow struct{ name, arg, usage, env, def string }

func flagRows(fs *flag.FlagSet) []flagRow {
	var rows []flagRow
	order := []string{"listen", "sweep-interval", "backend", "redis-url", "redis-timeout", "redis-fail", "redis-deadlines", "redis-deny-cache", "redis-max-scale", "admin-token", "max-id-bytes",
		"shards", "max-buckets", "max-bucket-bytes", "max-scales-per-id", "timeout", "max-batch", "shutdown-timeout", "version"}
	order = append(order, snapshotFlagNames()...)
	order = append(order, policyFlagNames()...)
	order = append(order, exposureFlagNames()...)
	order = append(order, rlsFlagNames()...)
	order = append(order, listenFlagNames()...)
	order = append(order, dashboardFlagNames()...)
	order = append(order, logFlagNames()...)
	order = append(order, healthFlagNames()...)
	// Flags declared elsewhere and not placed above come last, by name.
	listed := map[string]bool{}
	for _, name := range order {
		listed[name] = true
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !listed[f.Name] {
			order = append(order, f.Name)
		}
	})
	for _, name := range order {
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		arg, u := flag.UnquoteUsage(f)
		def := f.DefValue
		if arg == "string" {
			def = fmt.Sprintf("%q", def)
		}
		rows = append(rows, flagRow{name: f.Name, arg: arg, usage: u, env: envName(f.Name), def: def})
	}
	return rows
}

// version is what -version prints and the start line logs: the module
// version the binary was built from, then, when the build recorded them,
// the VCS revision, its commit time and "+modified" for a tree with
// uncommitted changes, and the Go release. A build from a git checkout
// (go build records the checkout unless -buildvcs=false) shows which
// commit it is even without a tag; go install of a tagged release shows
// the tag.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	return buildVersion(bi)
}

// buildVersion is version for the build information bi.
func buildVersion(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	var extra []string
	if rev != "" {
		if modified {
			rev += "+modified"
		}
		extra = append(extra, "revision "+rev)
	}
	if at != "" {
		extra = append(extra, at)
	}
	if bi.GoVersion != "" {
		extra = append(extra, bi.GoVersion)
	}
	if len(extra) == 0 {
		return v
	}
	return v + " (" + strings.Join(extra, ", ") + ")"
}
