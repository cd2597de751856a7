package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/raterlimiter/raterlimiter/internal/sidecar/cli"
)

// envoyproxy/ratelimit's environment variables, so that a deployment of
// that service runs the sidecar's Envoy RLS with its environment as it is.
// They are read only when the RLS is asked for (-rls-listen or -rls-config,
// by flag or RATERLIMITER_ variable, or the peer's RUNTIME_ROOT,
// RUNTIME_SUBDIRECTORY or RUNTIME_APPDIRECTORY), and only for a flag that
// neither the command line nor a RATERLIMITER_ variable sets. peerTable is
// the whole mapping: one row per flag they set, and one per group that has
// no counterpart, with the reason.

// peerRow is a group of the peer's variables and the flag they set.
type peerRow struct {
	// vars are the variables the row reads; a name ending in '*' stands
	// for every variable it starts.
	vars []string
	// flag is the flag they set, "" when none does.
	flag string
	// when, if set, says why the variables are not in force ("" when
	// they are), as the peer reads them.
	when func(get peerGet) (why string, err error)
	// value makes the flag's value from the variables; nil: the first
	// one's, as it is.
	value func(get peerGet) (string, error)
	// redis marks a flag of the Redis backend: set only when the backend
	// is Redis.
	redis bool
	// why says, for a row without a flag, why there is none, naming the
	// flag to use where one comes near.
	why string
}

// peerGet reads one of the peer's variables.
type peerGet func(name string) (string, bool)

var peerTable = []peerRow{
	{vars: []string{"RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY"}, flag: "rls-config", value: peerConfigDir},
	// The peer always serves gRPC: a deployment that names its
	// configuration directory gets its address too.
	{vars: []string{"GRPC_UDS", "GRPC_HOST", "GRPC_PORT", "RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY"}, flag: "rls-listen", value: peerGRPCListen},
	{vars: []string{"MERGE_DOMAIN_CONFIG"}, flag: "rls-merge-domains"},
	{vars: []string{"SHADOW_MODE"}, flag: "rls-shadow-mode"},
	{vars: []string{"QUOTA_MODE"}, flag: "rls-quota-mode"},
	{vars: []string{"RESPONSE_DYNAMIC_METADATA"}, flag: "rls-response-metadata"},
	{vars: []string{"LIMIT_RESPONSE_HEADERS_ENABLED"}, flag: "rls-response-headers"},
	{vars: []string{"GRPC_SERVER_TLS_CERT", "GRPC_SERVER_USE_TLS"}, flag: "rls-tls-cert", when: peerTLS},
	{vars: []string{"GRPC_SERVER_TLS_KEY", "GRPC_SERVER_USE_TLS"}, flag: "rls-tls-key", when: peerTLS},
	{vars: []string{"GRPC_CLIENT_TLS_CACERT", "GRPC_SERVER_USE_TLS"}, flag: "rls-tls-client-ca", when: peerTLS},
	{vars: []string{"GRPC_CLIENT_TLS_SAN", "GRPC_SERVER_USE_TLS", "GRPC_CLIENT_TLS_CACERT"}, flag: "rls-tls-client-san", when: peerClientTLS},
	{vars: []string{"HOST", "PORT"}, flag: "listen", value: peerHTTPListen},
	{vars: []string{"LOG_FORMAT"}, flag: "log-format", value: peerLogFormat},
	{vars: []string{"BACKEND_TYPE", "REDIS_URL"}, flag: "backend", when: peerBackend, value: func(peerGet) (string, error) { return "redis", nil }},
	{vars: []string{"REDIS_URL", "REDIS_SOCKET_TYPE", "REDIS_TYPE", "REDIS_AUTH", "REDIS_TLS"}, flag: "redis-url", value: peerRedisURL, redis: true},
	{vars: []string{"REDIS_TIMEOUT"}, flag: "redis-timeout", redis: true},

	{vars: []string{"RUNTIME_WATCH_ROOT"}, why: "-watch-files (on) watches -rls-config, its files and every symlink on the way to it, a swapped root included"},
	{vars: []string{"RUNTIME_IGNOREDOTFILES"}, why: "dot files in -rls-config are never read"},
	{vars: []string{"GRPC_MAX_CONNECTION_AGE", "GRPC_MAX_CONNECTION_AGE_GRACE"}, why: "connections are bounded by -rls-idle-timeout, -rls-keepalive, -rls-max-conns-per-ip and -rls-max-conns instead"},
	{vars: []string{"DEBUG_HOST", "DEBUG_PORT"}, why: "-admin-listen HOST:PORT serves /debug/pprof/ and /metrics"},
	{vars: []string{"LOG_LEVEL"}, why: "the sidecar logs at info: a start, a reload, a warning, never a line a request"},
	{vars: []string{"CONFIG_TYPE", "CONFIG_GRPC_XDS_*", "XDS_CLIENT_*", "FORCE_START_WITHOUT_INITIAL_CONFIG", "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED"}, why: "the configuration comes from -rls-config's files, and one that does not load stops the start"},
	{vars: []string{"USE_STATSD", "STATSD_*", "USE_DOG_STATSD*", "EXTRA_TAGS", "STATS_FLUSH_INTERVAL", "DISABLE_STATS", "USE_PROMETHEUS", "PROMETHEUS_*"}, why: "metrics are Prometheus series on /metrics, always (-listen, or -admin-listen)"},
	{vars: []string{"MEMCACHE_*"}, why: "there is no memcache backend: -backend redis shares counters across replicas"},
	{vars: []string{"LOCAL_CACHE_SIZE_IN_BYTES"}, why: "-redis-deny-cache (a number of ids, on by default) is the sidecar's cache of denials"},
	{vars: []string{"NEAR_LIMIT_RATIO"}, why: "no near-limit statistics"},
	{vars: []string{"CACHE_KEY_PREFIX"}, why: "the sidecar's Redis keys have their own prefix, apart from the peer's"},
	{vars: []string{"EXPIRATION_JITTER_MAX_SECONDS"}, why: "keys expire with their window"},
	{vars: []string{"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT"}, why: "every hit counts, as the peer's default"},
	{vars: []string{"LIMIT_LIMIT_HEADER", "LIMIT_REMAINING_HEADER", "LIMIT_RESET_HEADER"}, why: "-rls-response-headers writes RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset, the peer's default names"},
	{vars: []string{"REDIS_POOL_SIZE", "REDIS_PIPELINE_WINDOW", "REDIS_PIPELINE_LIMIT", "REDIS_POOL_ON_EMPTY_BEHAVIOR"}, why: "one multiplexed connection per Redis node pipelines every check"},
	{vars: []string{"REDIS_TLS_CACERT", "REDIS_TLS_CLIENT_CERT", "REDIS_TLS_CLIENT_KEY", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION"}, why: "rediss:// verifies Redis against the system's roots, with no client certificate"},
	{vars: []string{"REDIS_SENTINEL_AUTH"}, why: "the Sentinels themselves are asked without a password"},
	{vars: []string{"REDIS_PERSECOND*"}, why: "one Redis (or Cluster, or Sentinel set) holds every window"},
	{vars: []string{"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION"}, why: "/healthcheck and /healthz ask Redis at every probe"},
	{vars: []string{"TRACING_*"}, why: "no tracing"},
}

// peerNote is a line the sidecar logs at start about the peer's variables.
type peerNote struct {
	level slog.Level
	msg   string
}

// applyPeerEnv sets, from the peer's variables, each flag of peerTable
// that set (the flags the command line and RATERLIMITER_ variables set)
// leaves unset, and adds it to set, when the RLS is asked for. It returns
// what to log about every peer variable there is; a value no flag takes is
// a usage error naming the variable.
func applyPeerEnv(fs *flag.FlagSet, set map[string]bool, lookup func(string) (string, bool), environ []string) ([]peerNote, error) {
	get := peerGet(lookup)
	if !set["rls-listen"] && !set["rls-config"] && len(get.present([]string{"RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY"}, environ)) == 0 {
		return nil, nil
	}
	var notes []peerNote
	info := func(format string, a ...any) {
		notes = append(notes, peerNote{slog.LevelInfo, fmt.Sprintf(format, a...)})
	}
	for _, r := range peerTable {
		present := get.present(r.vars, environ)
		if len(present) == 0 {
			continue
		}
		names := strings.Join(present, ", ")
		switch {
		case r.flag == "":
			notes = append(notes, peerNote{slog.LevelWarn, fmt.Sprintf("envoyproxy/ratelimit's %s: no counterpart here, not read: %s", names, r.why)})
			continue
		case set[r.flag]:
			info("envoyproxy/ratelimit's %s not read: -%s is set", names, r.flag)
			continue
		case r.redis && fs.Lookup("backend").Value.String() != "redis":
			info("envoyproxy/ratelimit's %s not read: the backend is %s", names, fs.Lookup("backend").Value.String())
			continue
		}
		if r.when != nil {
			why, err := r.when(get)
			if err != nil {
				return notes, cli.Usagef("envoyproxy/ratelimit's %s: %v", names, err)
			}
			if why != "" {
				info("envoyproxy/ratelimit's %s not read: %s", names, why)
				continue
			}
		}
		v, _ := get(r.vars[0])
		if r.value != nil {
			var err error
			if v, err = r.value(get); err != nil {
				return notes, cli.Usagef("envoyproxy/ratelimit's %s: %v", names, err)
			}
		}
		if err := fs.Set(r.flag, v); err != nil {
			return notes, cli.Usagef("envoyproxy/ratelimit's %s: -%s %q: %v", names, r.flag, v, err)
		}
		set[r.flag] = true
		shown := v
		if u, err := url.Parse(v); err == nil && u.User != nil {
			shown = u.Redacted()
		}
		info("envoyproxy/ratelimit's %s read as -%s %s (the flag or %s would win)", names, r.flag, shown, envName(r.flag))
	}
	return notes, nil
}

// present is the variables of vars that are set, a prefix ("NAME*")
// matched against environ ("NAME=value" each).
func (get peerGet) present(vars, environ []string) []string {
	var out []string
	for _, v := range vars {
		prefix, many := strings.CutSuffix(v, "*")
		if !many {
			if _, ok := get(v); ok {
				out = append(out, v)
			}
			continue
		}
		for _, kv := range environ {
			name, _, _ := strings.Cut(kv, "=")
			if _, ok := get(name); ok && strings.HasPrefix(name, prefix) {
				out = append(out, name)
			}
		}
	}
	return out
}

// or is the variable name, or def when it is not set.
func (get peerGet) or(name, def string) string {
	if v, ok := get(name); ok {
		return v
	}
	return def
}

// bool reads a boolean as the peer does (strconv.ParseBool); unset is
// false.
func (get peerGet) bool(name string) (bool, error) {
	v, ok := get(name)
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q is not a boolean", name, v)
	}
	return b, nil
}

// peerConfigDir is the peer's configuration directory,
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY with its defaults.
func peerConfigDir(get peerGet) (string, error) {
	return filepath.Join(get.or("RUNTIME_ROOT", "/srv/runtime_data/current"), get.or("RUNTIME_SUBDIRECTORY", ""),
		get.or("RUNTIME_APPDIRECTORY", "config")), nil
}

// peerGRPCListen is the peer's gRPC address: GRPC_UDS, or GRPC_HOST and
// GRPC_PORT with their defaults (0.0.0.0:8081).
func peerGRPCListen(get peerGet) (string, error) {
	if uds, ok := get("GRPC_UDS"); ok && uds != "" {
		return unixPrefix + uds, nil
	}
	return net.JoinHostPort(get.or("GRPC_HOST", "0.0.0.0"), get.or("GRPC_PORT", "8081")), nil
}

// peerHTTPListen is the peer's HTTP address (its /healthcheck): HOST and
// PORT with their defaults (0.0.0.0:8080).
func peerHTTPListen(get peerGet) (string, error) {
	return net.JoinHostPort(get.or("HOST", "0.0.0.0"), get.or("PORT", "8080")), nil
}

// peerTLS: the peer reads its gRPC listener's TLS files only with
// GRPC_SERVER_USE_TLS=true.
func peerTLS(get peerGet) (string, error) {
	on, err := get.bool("GRPC_SERVER_USE_TLS")
	if err != nil || on {
		return "", err
	}
	return "GRPC_SERVER_USE_TLS is not true", nil
}

// peerClientTLS: the peer checks a client certificate's name only with a
// client CA.
func peerClientTLS(get peerGet) (string, error) {
	if why, err := peerTLS(get); why != "" || err != nil {
		return why, err
	}
	if ca, _ := get("GRPC_CLIENT_TLS_CACERT"); ca == "" {
		return "no GRPC_CLIENT_TLS_CACERT", nil
	}
	return "", nil
}

// peerLogFormat is LOG_FORMAT: json, or text for anything else.
func peerLogFormat(get peerGet) (string, error) {
	if v, _ := get("LOG_FORMAT"); strings.EqualFold(v, "json") {
		return "json", nil
	}
	return "text", nil
}

// peerBackend: BACKEND_TYPE, whose default in the peer is redis, asks for
// Redis when it says so, or when it is unset and REDIS_URL is set.
func peerBackend(get peerGet) (string, error) {
	switch t, ok := get("BACKEND_TYPE"); {
	case !ok || strings.EqualFold(t, "redis"):
		if _, ok := get("REDIS_URL"); !ok {
			return "no REDIS_URL", nil
		}
		return "", nil
	case strings.EqualFold(t, "memcache"):
		return "", errors.New("there is no memcache backend: -backend redis shares counters across replicas, -backend memory counts in each one")
	default:
		return "", fmt.Errorf("BACKEND_TYPE %q is not redis", t)
	}
}

// peerRedisURL is -redis-url from the peer's REDIS_URL and the variables
// that say how to read it: REDIS_TYPE (single; sentinel,
// "MASTER,HOST:PORT,..."; cluster, "HOST:PORT,..."), REDIS_SOCKET_TYPE
// (unix, its default, or tcp; unset, an address that is no path is read
// as tcp), REDIS_AUTH ("PASSWORD" or "USER:PASSWORD") and REDIS_TLS. A URL
// (redis://, rediss://, unix://) is taken as it is.
func peerRedisURL(get peerGet) (string, error) {
	raw, _ := get("REDIS_URL")
	for _, scheme := range []string{"redis://", "rediss://", "unix://"} {
		if strings.HasPrefix(raw, scheme) {
			return raw, nil
		}
	}
	tlsOn, err := get.bool("REDIS_TLS")
	if err != nil {
		return "", err
	}
	u := &url.URL{Scheme: "redis"}
	if tlsOn {
		u.Scheme = "rediss"
	}
	if auth, _ := get("REDIS_AUTH"); auth != "" {
		if user, pass, found := strings.Cut(auth, ":"); found {
			u.User = url.UserPassword(user, pass)
		} else {
			u.User = url.UserPassword("", auth)
		}
	}
	addrs := strings.Split(raw, ",")
	for i := range addrs {
		addrs[i] = strings.TrimSpace(addrs[i])
	}
	q := url.Values{}
	switch typ := strings.ToLower(get.or("REDIS_TYPE", "single")); typ {
	case "single":
		sock, set := get("REDIS_SOCKET_TYPE")
		switch {
		case strings.EqualFold(sock, "unix") || !set && strings.HasPrefix(raw, "/"):
			u.Scheme, u.Path = "unix", raw
			return u.String(), nil
		case strings.EqualFold(sock, "tcp") || !set:
			u.Host = raw
		default:
			return "", fmt.Errorf("REDIS_SOCKET_TYPE %q is not unix or tcp", sock)
		}
	case "cluster":
		u.Host = addrs[0]
		q["addr"] = addrs[1:]
	case "sentinel":
		if len(addrs) < 2 {
			return "", fmt.Errorf("REDIS_URL %q: a sentinel set is MASTER,HOST:PORT[,HOST:PORT]", raw)
		}
		u.Host = addrs[1]
		q["addr"] = addrs[2:]
		q.Set("master_set", addrs[0])
	default:
		return "", fmt.Errorf("REDIS_TYPE %q is not single, sentinel or cluster", typ)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}
