package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/clientip"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/cli"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/policy"
	"github.com/raterlimiter/raterlimiter/internal/sidecar/rls"
)

// Every flag is declared once, in flagTable: its name, its group, the field
// of config it sets with its default, what a negative number means, and its
// usage line. From the table come the flag set, the environment variables
// (envPrefix and the name in upper case, dashes as underscores), the check
// that a flag applies to the chosen backend, -h and docs/configuration.md.
//
// Numbers follow the convention of the Go packages' Config structs: 0 (and
// an empty string) means the default; a negative number (-1) means off or
// no bound where the flag says so (flagDef.off), and is refused elsewhere.

// config is the parsed command line: each field is a flag's.
type config struct {
	listen          string
	maxBatch        int
	maxIDBytes      int
	shutdownTimeout time.Duration
	backend         string
	timeout         time.Duration
	// The memory backend.
	shards         int
	sweepInterval  time.Duration
	maxBuckets     int
	maxBucketBytes int64
	maxScalesPerID int
	// The Redis backend.
	redisURL       string
	redisTimeout   time.Duration
	redisFail      string
	redisDeadlines bool
	redisDenyCache int
	redisMaxScale  time.Duration
	// Answers held for their turn.
	maxWait                   time.Duration
	maxHeld, maxHeldPerClient int
	// Operations.
	adminToken                     string
	dashboardOff, dashboardHashIDs bool
	logFormat                      string
	watchFiles                     bool
	// Commands.
	version            bool
	healthcheck        string
	healthcheckTimeout time.Duration

	snap snapshotFlags // snapshot.go
	pol  policyFlags   // policies.go
	rls  rlsFlags      // rls.go
	lis  listenFlags   // tls.go
	exp  exposureFlags // exposure.go

	// proxies are -trusted-proxies, parsed by validate.
	proxies clientip.Proxies
	// peerNotes are envoyproxy/ratelimit's variables read (peerenv.go).
	peerNotes []peerNote
}

// maxIDBytesCap bounds -max-id-bytes: longer ids make no sense as keys, and
// the request buffer grows with them.
const maxIDBytesCap = 65536

// flagDef declares one flag.
type flagDef struct {
	name  string
	group flagGroup
	// value sets a field of config; the table's value holds the default.
	value flagValue
	// off says what a negative number means ("no bound"); "" refuses one.
	off string
	// usage says what the flag does, in at most 100 characters with off.
	usage string
}

// flagGroup is a heading of -h and of docs/configuration.md; groups appear
// in the order of their first flag in the table.
type flagGroup struct {
	title string
	// note, if set, says more under the title.
	note string
	// backends are the backends the group's flags apply to; 0: any. A flag
	// the chosen backend would ignore is refused, so that a setting never
	// looks applied when it is not.
	backends backendSet
	// commands make the binary do something else than serve. Only the
	// command line sets them: a stray RATERLIMITER_VERSION=true in a
	// deployment would otherwise turn the sidecar into a program that exits.
	commands bool
}

var (
	servingGroup  = flagGroup{title: "Serving"}
	backendGroup  = flagGroup{title: "Backend"}
	memoryGroup   = flagGroup{title: "Memory backend", backends: memoryBackend | localCounters, note: "They also shape the Redis backend's own counters under -redis-fail local."}
	snapshotGroup = flagGroup{title: "Snapshots", backends: memoryBackend, note: "The memory backend's counters, kept across restarts."}
	redisGroup    = flagGroup{title: "Redis backend", backends: redisBackend}
	gatewayGroup  = flagGroup{title: "Gateway", note: "Policies: limits the operator sets, for /auth and for checks by policy name."}
	rlsGroup      = flagGroup{title: "Envoy rate limit service", note: "envoyproxy/ratelimit's gRPC API and configuration files."}
	boundsGroup   = flagGroup{title: "Bounds", note: "What one client can hold of the HTTP server."}
	tlsGroup      = flagGroup{title: "TLS"}
	opsGroup      = flagGroup{title: "Operations"}
	commandsGroup = flagGroup{title: "Commands", commands: true, note: "Each does its job and exits. Only the command line sets them."}
)

// flagTable binds every flag to its field of c, which it sets to the flag's
// default.
func (c *config) flagTable() []flagDef {
	return []flagDef{
		{name: "listen", group: servingGroup, value: text(&c.listen, "127.0.0.1:8080"),
			usage: "address to serve HTTP on: host:port (port 0 picks a free one) or unix:/path"},
		{name: "unix-mode", group: servingGroup, value: text(&c.lis.unixMode, "0660"),
			usage: "permissions of the socket file of -listen unix:/path, in octal"},
		{name: "max-batch", group: servingGroup, value: number(&c.maxBatch, 1000),
			usage: "most checks in one POST /check_rates; more get 413"},
		{name: "max-id-bytes", group: servingGroup, value: number(&c.maxIDBytes, check.DefaultMaxIDBytes),
			usage: "longest id accepted, in bytes, at most 65536"},
		{name: "shutdown-timeout", group: servingGroup, value: duration(&c.shutdownTimeout, 10*time.Second),
			usage: "longest wait on SIGINT or SIGTERM for the requests in flight to be answered"},

		{name: "backend", group: backendGroup, value: text(&c.backend, "memory"),
			usage: "where counters live: memory (this process) or redis (shared by every sidecar)"},
		{name: "timeout", group: backendGroup, value: duration(&c.timeout, time.Second),
			usage: "longest wait for the backend's answer; past it the check gets 503"},

		{name: "shards", group: memoryGroup, value: number(&c.shards, 0),
			usage: "actors the ids are spread over; 0: half the CPUs, at least one"},
		{name: "sweep-interval", group: memoryGroup, value: duration(&c.sweepInterval, 10*time.Second), off: "never",
			usage: "how often records that no decision reads any more are removed"},
		{name: "max-buckets", group: memoryGroup, value: number(&c.maxBuckets, 4_000_000), off: "no bound",
			usage: "most live records; past it a new one evicts an expired or the least recently changed"},
		{name: "max-bucket-bytes", group: memoryGroup, value: number(&c.maxBucketBytes, 256<<20), off: "no bound",
			usage: "most bytes of live records, 48 and the id's each; past it as past -max-buckets"},
		{name: "max-scales-per-id", group: memoryGroup, value: number(&c.maxScalesPerID, 64), off: "no bound",
			usage: "most distinct scales one id may have records of; a check adding one gets 400"},

		{name: "snapshot", group: snapshotGroup, value: text(&c.snap.path, ""),
			usage: "file the counters are saved to on shutdown and loaded from on start; empty: none"},
		{name: "snapshot-interval", group: snapshotGroup, value: duration(&c.snap.interval, 0),
			usage: "also save the snapshot this often, so a crash loses one interval; 0: on shutdown only"},
		{name: "snapshot-ignore-corrupt", group: snapshotGroup, value: boolean(&c.snap.ignoreCorrupt, false),
			usage: "start empty, with a warning, from a corrupt or foreign snapshot instead of refusing to"},

		{name: "redis-url", group: redisGroup, value: text(&c.redisURL, "redis://127.0.0.1:6379/0"),
			usage: "the Redis: redis://HOST:PORT/DB, rediss:// for TLS, or unix:///path/to.sock"},
		{name: "redis-fail", group: redisGroup, value: text(&c.redisFail, "closed"),
			usage: "while Redis does not answer: closed (503), open (allow) or local (this sidecar counts)"},
		{name: "redis-timeout", group: redisGroup, value: duration(&c.redisTimeout, 0),
			usage: "ceiling on one call's wait for Redis, past which -redis-fail applies; 0: none"},
		{name: "redis-deny-cache", group: redisGroup, value: number(&c.redisDenyCache, 65536), off: "off",
			usage: "ids whose denial this sidecar answers itself, without Redis, until Redis would allow"},
		{name: "redis-deadlines", group: redisGroup, value: boolean(&c.redisDeadlines, false),
			usage: "count no check that Redis runs after its caller's deadline (costs Redis CPU)"},
		// A day covers the per-second to per-day limits callers name
		// themselves and bounds how long a flood of fresh ids stays in
		// Redis; longer quotas belong in a policy, whose scale is not bound.
		{name: "redis-max-scale", group: redisGroup, value: duration(&c.redisMaxScale, 24*time.Hour),
			usage: "longest scale a check may name itself (a policy's is not bound); at most 87600h"},

		{name: "policies", group: gatewayGroup, value: text(&c.pol.path, ""),
			usage: "policies file (YAML); reloaded when it changes, on SIGHUP and POST /reload"},
		{name: "policies-only", group: gatewayGroup, value: boolean(&c.pol.only, false),
			usage: "refuse checks that do not name a policy, so callers cannot choose their limits"},
		{name: "auth-headers", group: gatewayGroup, value: text(&c.pol.authHeaders, ""),
			usage: "the proxy in front of /auth: nginx, caddy or traefik; /auth answers 503 until set"},
		{name: "auth-deny-status", group: gatewayGroup, value: number(&c.pol.denyStatus, 429),
			usage: "status of a denied /auth: 429, or 401 or 403 for nginx auth_request"},

		{name: "rls-listen", group: rlsGroup, value: text(&c.rls.listen, ""),
			usage: "address to serve Envoy's rate limit service (gRPC) on; empty: off"},
		{name: "rls-config", group: rlsGroup, value: text(&c.rls.config, ""),
			usage: "envoyproxy/ratelimit configuration: a YAML file or a directory of *.yaml files"},
		{name: "rls-merge-domains", group: rlsGroup, value: boolean(&c.rls.merge, false),
			usage: "let several files give one domain, their descriptors merged (MERGE_DOMAIN_CONFIG)"},
		{name: "rls-shadow-mode", group: rlsGroup, value: boolean(&c.rls.shadow, false),
			usage: "count and report every descriptor, but answer OK overall (SHADOW_MODE)"},
		{name: "rls-quota-mode", group: rlsGroup, value: boolean(&c.rls.quota, false),
			usage: "every rate limit in quota mode: over the limit the status stays OK (QUOTA_MODE)"},
		{name: "rls-response-metadata", group: rlsGroup, value: boolean(&c.rls.metadata, false),
			usage: "add the request and its quota violations to each answer's dynamic_metadata"},
		{name: "rls-response-headers", group: rlsGroup, value: boolean(&c.rls.headers, false),
			usage: "add RateLimit-Limit, -Remaining and -Reset to the response (LIMIT_RESPONSE_HEADERS_ENABLED)"},
		{name: "rls-max-descriptors", group: rlsGroup, value: number(&c.rls.maxDescriptors, rls.DefaultMaxDescriptors),
			usage: "most descriptors in one request (more: InvalidArgument)"},
		{name: "rls-tls-cert", group: rlsGroup, value: text(&c.rls.cert, ""),
			usage: "PEM certificate chain to serve the RLS over TLS with (needs -rls-tls-key)"},
		{name: "rls-tls-key", group: rlsGroup, value: text(&c.rls.key, ""),
			usage: "PEM private key of -rls-tls-cert"},
		{name: "rls-tls-client-ca", group: rlsGroup, value: text(&c.rls.clientCA, ""),
			usage: "mutual TLS: PEM CA bundle that clients' certificates must chain to"},
		{name: "rls-tls-client-san", group: rlsGroup, value: text(&c.rls.clientSAN, ""),
			usage: "mutual TLS: a DNS name or URI (a SPIFFE id) a client certificate must also carry"},
		{name: "rls-max-conns-per-ip", group: rlsGroup, value: number(&c.rls.maxConnsPerIP, rls.DefaultMaxConnsPerIP), off: "no bound",
			usage: "most RLS connections one client address may hold at once"},
		{name: "rls-max-conns", group: rlsGroup, value: number(&c.rls.maxConns, rls.DefaultMaxConns), off: "no bound",
			usage: "most RLS connections open at once over every address"},
		{name: "rls-max-streams", group: rlsGroup, value: number(&c.rls.maxStreams, rls.DefaultMaxStreams),
			usage: "most calls open at once on one RLS connection (HTTP/2 streams)"},
		{name: "rls-arriving-budget", group: rlsGroup, value: number(&c.rls.arrivingBudget, rls.DefaultArrivingBudget), off: "no bound",
			usage: "bytes of RLS requests begun and not yet whole, over every connection"},
		{name: "rls-receive-timeout", group: rlsGroup, value: duration(&c.rls.receiveTimeout, rls.DefaultReceiveTimeout),
			usage: "longest an RLS request may take to arrive after its headers"},
		{name: "rls-idle-timeout", group: rlsGroup, value: duration(&c.rls.idleTimeout, rls.DefaultIdleTimeout),
			usage: "close an RLS connection with no call open for this long"},
		{name: "rls-keepalive", group: rlsGroup, value: duration(&c.rls.keepalive, rls.DefaultKeepalive),
			usage: "ping an RLS connection silent this long; close it if the ping is not answered in 10s"},

		{name: "max-conns-per-ip", group: boundsGroup, value: number(&c.exp.perIP, 1024), off: "no bound",
			usage: "most connections one client address may hold at once; more get 503 and are closed"},
		{name: "max-conns-per-proxy", group: boundsGroup, value: number(&c.exp.perProxy, 8192), off: "no bound",
			usage: "the same bound for the addresses of -trusted-proxies"},
		{name: "trusted-proxies", group: boundsGroup, value: text(&c.exp.trustedProxies, ""),
			usage: "reverse proxies held to -max-conns-per-proxy: addresses, networks (10.0.0.0/8,::1)"},
		{name: "first-byte-timeout", group: boundsGroup, value: duration(&c.exp.firstByte, 2*time.Second),
			usage: "close a new connection that sends nothing for this long"},
		{name: "body-budget", group: boundsGroup, value: number(&c.exp.bodyBudget, 32<<20), off: "no bound",
			usage: "bytes of requests read and not yet answered, over every connection; past it 503"},
		{name: "max-wait", group: boundsGroup, value: duration(&c.maxWait, 10*time.Second),
			usage: "longest an answer is held for its turn (wait=1); a longer wait is a 429 at once"},
		{name: "max-held", group: boundsGroup, value: number(&c.maxHeld, 512),
			usage: "most answers held for their turn at once; past it a check that would wait is denied"},
		{name: "max-held-per-client", group: boundsGroup, value: number(&c.maxHeldPerClient, 32),
			usage: "the same bound for one client address"},

		{name: "tls-cert", group: tlsGroup, value: text(&c.lis.cert, ""),
			usage: "PEM certificate chain to serve HTTPS with (needs -tls-key)"},
		{name: "tls-key", group: tlsGroup, value: text(&c.lis.key, ""),
			usage: "PEM private key of -tls-cert"},

		{name: "admin-token", group: opsGroup, value: text(&c.adminToken, ""),
			usage: "bearer token the admin endpoints require (not /metrics); without one: loopback only"},
		{name: "admin-token-file", group: opsGroup, value: text(&c.exp.adminTokenFile, ""),
			usage: "read the admin token from this file instead, unseen in the process list"},
		{name: "admin-listen", group: opsGroup, value: text(&c.exp.adminListen, ""),
			usage: "serve the admin endpoints on this address; empty: on -listen if loopback or with a token"},
		{name: "metrics-public", group: opsGroup, value: boolean(&c.exp.metricsPublic, false),
			usage: "serve /metrics on -listen even where the other admin endpoints are not served"},
		{name: "dashboard-off", group: opsGroup, value: boolean(&c.dashboardOff, false),
			usage: "turn off GET /dashboard and its counting of the hottest ids"},
		{name: "dashboard-hash-ids", group: opsGroup, value: boolean(&c.dashboardHashIDs, false),
			usage: "show ids on /dashboard as a keyed hash, for deployments where ids are secrets"},
		{name: "watch-files", group: opsGroup, value: boolean(&c.watchFiles, true),
			usage: "reload -policies, -rls-config and TLS files when they change, not only on SIGHUP"},
		{name: "log-format", group: opsGroup, value: text(&c.logFormat, "text"),
			usage: "format of the log on stderr: text (key=value) or json (one object a line)"},

		{name: "check-policies", group: commandsGroup, value: text(&c.pol.check, ""),
			usage: "check this policies file, print what is wrong with it and exit: 0 if it loads, 2 if not"},
		{name: "check-rls-config", group: commandsGroup, value: text(&c.rls.check, ""),
			usage: "check this envoyproxy/ratelimit configuration and exit: 0 if it loads, 2 if not"},
		{name: "healthcheck", group: commandsGroup, value: text(&c.healthcheck, ""),
			usage: "GET this URL of a sidecar (/livez, /readyz or /healthz) and exit: 0 if 200, 1 if not"},
		{name: "healthcheck-timeout", group: commandsGroup, value: duration(&c.healthcheckTimeout, time.Second),
			usage: "how long -healthcheck waits for the whole answer"},
		{name: "version", group: commandsGroup, value: boolean(&c.version, false),
			usage: "print the version and exit"},
	}
}

// parse reads args, then the environment (lookupEnv) for the flags args
// left unset, and checks the values. -h gives flag.ErrHelp.
func (c *config) parse(args []string, lookupEnv func(string) (string, bool)) error {
	table := c.flagTable()
	fs := flag.NewFlagSet("raterlimiter", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for _, d := range table {
		fs.Var(d.value, d.name, d.usage)
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, d := range table {
		name := d.env()
		if name == "" || set[d.name] {
			continue
		}
		if v, ok := lookupEnv(name); ok {
			if err := d.value.Set(v); err != nil {
				return cli.Usagef("invalid value %q for %s: %v", v, name, err)
			}
			set[d.name] = true
		}
	}
	var err error
	if c.peerNotes, err = applyPeerEnv(fs, set, lookupEnv, os.Environ()); err != nil {
		return err
	}
	for _, d := range table {
		if d.value.negative() && d.off == "" {
			return cli.Usagef("-%s must not be negative (0 means its default, %s)", d.name, fs.Lookup(d.name).DefValue)
		}
	}
	if err := c.validate(); err != nil {
		return err
	}
	chosen := c.backends()
	for _, d := range table {
		if b := d.group.backends; set[d.name] && b != 0 && b&chosen == 0 {
			return cli.Usagef("-%s applies only to %s; with %s it would do nothing", d.name, b, chosen)
		}
	}
	return nil
}

// validate refuses what no flag refuses by itself: values out of range,
// and flags that need others.
func (c *config) validate() error {
	bad := cli.Usagef
	r := &c.rls
	switch {
	case c.backend != "memory" && c.backend != "redis":
		return bad("-backend must be memory or redis, not %q", c.backend)
	case c.redisFail != "closed" && c.redisFail != "open" && c.redisFail != "local":
		return bad("-redis-fail must be closed, open or local, not %q", c.redisFail)
	case c.maxIDBytes > maxIDBytesCap:
		return bad("-max-id-bytes must be from 1 to %d, not %d", maxIDBytesCap, c.maxIDBytes)
	case c.redisMaxScale < time.Millisecond || c.redisMaxScale > check.MaxScale:
		return bad("-redis-max-scale must be from 1ms to 87600h (10 years), not %v", c.redisMaxScale)
	case c.maxWait < time.Millisecond || c.maxWait > check.MaxScale:
		return bad("-max-wait must be from 1ms to ten years, not %v", c.maxWait)
	case c.logFormat != "text" && c.logFormat != "json":
		return bad("-log-format must be text or json, not %q", c.logFormat)
	case c.snap.interval > 0 && c.snap.path == "":
		return bad("-snapshot-interval needs -snapshot")
	case (c.lis.cert == "") != (c.lis.key == ""):
		return bad("-tls-cert and -tls-key go together")
	case c.exp.adminTokenFile != "" && c.adminToken != "":
		return bad("-admin-token and -admin-token-file are exclusive: keep the file")
	case c.pol.only && c.pol.path == "":
		return bad("-policies-only needs -policies")
	case c.pol.authHeaders != "" && c.pol.path == "":
		return bad("-auth-headers needs -policies")
	case c.pol.denyStatus != 429 && c.pol.denyStatus != 401 && c.pol.denyStatus != 403:
		return bad("-auth-deny-status must be 429, 401 or 403, not %d", c.pol.denyStatus)
	case r.listen != "" && r.config == "":
		return bad("-rls-listen needs -rls-config")
	case r.config != "" && r.listen == "":
		return bad("-rls-config needs -rls-listen")
	case (r.cert == "") != (r.key == ""):
		return bad("-rls-tls-cert and -rls-tls-key go together")
	case r.clientCA != "" && r.cert == "":
		return bad("-rls-tls-client-ca needs -rls-tls-cert: mutual TLS is TLS first")
	case r.clientSAN != "" && r.clientCA == "":
		return bad("-rls-tls-client-san needs -rls-tls-client-ca")
	case r.cert != "" && r.listen == "":
		return bad("-rls-tls-cert needs -rls-listen")
	case r.merge && r.config == "" && r.check == "":
		return bad("-rls-merge-domains needs -rls-config or -check-rls-config")
	case (r.quota || r.metadata || r.headers) && r.listen == "":
		return bad("-rls-quota-mode, -rls-response-metadata and -rls-response-headers need -rls-listen")
	}
	if _, err := policy.ParseGateway(c.pol.authHeaders); err != nil {
		return bad("-auth-headers must be nginx, caddy or traefik, not %q", c.pol.authHeaders)
	}
	if _, err := c.lis.mode(); err != nil {
		return bad("-unix-mode must be octal permissions such as 0660, not %q", c.lis.unixMode)
	}
	for _, l := range [][2]string{{"listen", c.listen}, {"admin-listen", c.exp.adminListen}, {"rls-listen", r.listen}} {
		if err := checkListen(l[0], l[1]); err != nil {
			return err
		}
	}
	if c.backend == "redis" {
		if _, err := rueidis.ParseURL(c.redisURL); err != nil {
			return bad("invalid value %q for -redis-url: %v", c.redisURL, err)
		}
	}
	if c.healthcheck != "" {
		if _, _, err := healthTarget(c.healthcheck); err != nil {
			return err
		}
	}
	var proxies []string
	for _, p := range strings.Split(c.exp.trustedProxies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			proxies = append(proxies, p)
		}
	}
	var err error
	if c.proxies, err = clientip.ParseProxies(proxies...); err != nil {
		return bad("-trusted-proxies: %s", strings.TrimPrefix(err.Error(), "clientip: "))
	}
	return nil
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

// backendSet is a set of backends a flag applies to.
type backendSet uint8

const (
	memoryBackend backendSet = 1 << iota // -backend memory
	redisBackend                         // -backend redis
	localCounters                        // the Redis backend's own counters, -redis-fail local
)

// backends are the backends c chose.
func (c *config) backends() backendSet {
	switch {
	case c.backend == "memory":
		return memoryBackend
	case c.redisFail == "local":
		return redisBackend | localCounters
	}
	return redisBackend
}

func (b backendSet) String() string {
	switch b {
	case memoryBackend:
		return "-backend memory"
	case memoryBackend | localCounters:
		return "-backend memory (and to -backend redis with -redis-fail local)"
	case redisBackend | localCounters:
		return "-backend redis -redis-fail local"
	}
	return "-backend redis"
}

// envPrefix starts the environment variable of every flag.
const envPrefix = "RATERLIMITER_"

// env is the environment variable that sets d, or "" when only the command
// line does.
func (d flagDef) env() string {
	if d.group.commands {
		return ""
	}
	return envName(d.name)
}

// envName is the environment variable of the flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// shown is d as -h and docs/configuration.md show it, from a table whose
// values hold their defaults: what its value is, its default and its usage.
func (d flagDef) shown() (arg, def, usage string) {
	arg, def, usage = d.value.arg(), d.value.String(), d.usage
	if arg == "string" {
		def = strconv.Quote(def)
	}
	if d.off != "" {
		usage += "; -1: " + d.off
	}
	return arg, def, usage
}

// flagGroups are the groups of table, in the order of their first flags.
func flagGroups(table []flagDef) []flagGroup {
	var gs []flagGroup
	for _, d := range table {
		if !slices.Contains(gs, d.group) {
			gs = append(gs, d.group)
		}
	}
	return gs
}

// usage writes -h: every flag under its group's title, with its environment
// variable and its default.
func usage(w io.Writer) {
	var c config
	table := c.flagTable()
	fmt.Fprint(w, "Usage: raterlimiter [flags]\n\n"+
		"raterlimiter serves check_rate(id, scale, limit) over HTTP next to an application.\n"+
		"Each flag can also be set by the environment variable beside it; the command line wins.\n"+
		"A number 0 means the flag's default; -1 means off or no bound where the flag says so.\n")
	for _, g := range flagGroups(table) {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		if g.note != "" {
			fmt.Fprintf(w, "  %s\n", g.note)
		}
		for _, d := range table {
			if d.group != g {
				continue
			}
			arg, def, use := d.shown()
			meta := "default " + def
			if d.env() != "" {
				meta = d.env() + ", " + meta
			}
			fmt.Fprintf(w, "  %s  (%s)\n        %s\n", strings.TrimSpace("-"+d.name+" "+arg), meta, use)
		}
	}
}

// envWarnings are the warnings the sidecar logs at start about the
// variables of environ ("NAME=value", as os.Environ gives them) that
// lookup sees, that start with envPrefix and that no flag reads: a misspelt
// RATERLIMITER_POLICY must not leave a sidecar without its rules and
// without a word. Each names the variable, never its value (it may be a
// secret), and the variable it may have meant.
func envWarnings(lookup func(string) (string, bool), environ []string) []string {
	var c config
	var names []string
	commands := map[string]bool{}
	for _, d := range c.flagTable() {
		if d.group.commands {
			commands[d.name] = true
		} else {
			names = append(names, d.env())
		}
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if _, seen := lookup(name); !seen || !strings.HasPrefix(name, envPrefix) || slices.Contains(names, name) {
			continue
		}
		flagName := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, envPrefix), "_", "-"))
		switch near := closest(name, names); {
		case commands[flagName]:
			out = append(out, name+" is ignored: -"+flagName+" is set on the command line only")
		case near != "":
			out = append(out, name+" is ignored: no flag reads it (did you mean "+near+"?)")
		default:
			out = append(out, name+" is ignored: no flag reads it")
		}
	}
	slices.Sort(out)
	return out
}

// closest returns the name of names nearest to s by edit distance, if it
// is at most 3 edits away.
func closest(s string, names []string) string {
	best, bestD := "", 4
	for _, n := range names {
		if d := editDistance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// flagValue is a flag's value, bound to a field of config.
type flagValue interface {
	flag.Value
	// arg names the kind of value in -h: "string", "int", "duration", or
	// "" for a bool.
	arg() string
	negative() bool
}

// textValue is a string flag; empty means the default.
type textValue struct {
	p   *string
	def string
}

func text(p *string, def string) textValue { *p = def; return textValue{p, def} }

func (v textValue) Set(s string) error {
	*v.p = cmp.Or(s, v.def)
	return nil
}
func (v textValue) String() string { return deref(v.p) }
func (textValue) arg() string      { return "string" }
func (textValue) negative() bool   { return false }

// numberValue is a whole number flag; 0 means the default.
type numberValue[T int | int64] struct {
	p   *T
	def T
}

func number[T int | int64](p *T, def T) numberValue[T] { *p = def; return numberValue[T]{p, def} }

func (v numberValue[T]) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || int64(T(n)) != n {
		return errors.New("want a whole number, such as 100")
	}
	*v.p = cmp.Or(T(n), v.def)
	return nil
}
func (v numberValue[T]) String() string { return fmt.Sprint(deref(v.p)) }
func (numberValue[T]) arg() string      { return "int" }
func (v numberValue[T]) negative() bool { return *v.p < 0 }

// durationValue is a duration flag; 0 means the default, and -1 is a
// negative duration as -1s is.
type durationValue struct {
	p   *time.Duration
	def time.Duration
}

func duration(p *time.Duration, def time.Duration) durationValue {
	*p = def
	return durationValue{p, def}
}

func (v durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*v.p = cmp.Or(d, v.def)
	return nil
}

// String is the duration as time.Duration writes it, without zero units at
// its end: 24h, not 24h0m0s.
func (v durationValue) String() string {
	s := deref(v.p).String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
func (durationValue) arg() string      { return "duration" }
func (v durationValue) negative() bool { return *v.p < 0 }

// parseDuration is time.ParseDuration with an error that says what a
// duration looks like: a number without a unit, as in -timeout 5, is the
// usual mistake.
func parseDuration(s string) (time.Duration, error) {
	if s == "-1" {
		return -1, nil
	}
	d, err := time.ParseDuration(s)
	if err == nil {
		return d, nil
	}
	if _, numErr := strconv.ParseFloat(s, 64); numErr == nil && strings.Trim(s, "+-.0123456789") == "" {
		return 0, fmt.Errorf("a duration needs a unit: %ss, %sms or %sm, say", s, s, s)
	}
	return 0, errors.New("want a duration such as 5s, 250ms, 1m30s or 2h")
}

// boolValue is a bool flag.
type boolValue struct{ p *bool }

func boolean(p *bool, def bool) boolValue { *p = def; return boolValue{p} }

func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	*v.p = b
	return nil
}
func (v boolValue) String() string { return strconv.FormatBool(deref(v.p)) }
func (boolValue) IsBoolFlag() bool { return true }
func (boolValue) arg() string      { return "" }
func (boolValue) negative() bool   { return false }

// deref is *p, or the zero value for nil: the flag package calls String on
// a zero Value.
func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
