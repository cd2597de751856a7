package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raterlimiter/raterlimiter/internal/testkit/tooltest"
)

// Careless files and hostile clients, on the real binary: what an
// operator's mistake with a file or a client that never reads can make the
// sidecar hold.

// sockstatTCPMem is the kernel's TCP memory, all sockets of the host, in
// bytes ("TCP: ... mem PAGES" of /proc/net/sockstat).
func sockstatTCPMem(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/net/sockstat")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^TCP:.* mem (\d+)`).FindSubmatch(b)
	require.NotNil(t, m, "%s", b)
	pages, err := strconv.ParseInt(string(m[1]), 10, 64)
	require.NoError(t, err)
	return pages * int64(os.Getpagesize())
}

// skmemRe reads what ss says a socket holds: its receive queue (r), its
// send queue written and queued (t, w) and what it has reserved ahead (f).
var skmemRe = regexp.MustCompile(`skmem:\(r(\d+),rb\d+,t(\d+),tb\d+,f(\d+),w(\d+)`)

// socketMemory is the kernel memory the TCP sockets ss selects by filter
// hold, as ss reports it, and how many sockets it summed.
func socketMemory(t *testing.T, ss, filter string) (bytes int64, sockets int) {
	t.Helper()
	out, err := exec.Command(ss, "-tmnH", filter).Output()
	require.NoError(t, err)
	for _, m := range skmemRe.FindAllStringSubmatch(string(out), -1) {
		for _, v := range m[1:] {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			bytes += n
		}
		sockets++
	}
	return bytes, sockets
}

// TestHostileUnreadPipelineIsBounded: 50 connections from one address
// each send 20,000 pipelined checks and never read an answer. Unbounded,
// the sidecar answered ahead until the kernel's send buffer of each
// connection had grown to its maximum (4 MiB): its 50 sockets pinned 209
// MiB of kernel TCP memory until the write timeout (248 MiB with the
// clients' own), and an address's 1,024 connections would pin about 4 GB,
// beyond the host's TCP memory for every process. Bounded, the sidecar's
// sockets hold at most 64 MB (13.5 MiB measured), and a bystander on
// another address is answered throughout. On loopback the clients'
// sockets are on this host too; what they hold (mostly the requests they
// queued and the sidecar has not read) is theirs, logged, not judged.
func TestHostileUnreadPipelineIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the binary")
	}
	ss := tooltest.Need(t, "ss", "iproute2")
	const conns, pipelined = 50, 20000
	s := start(t, nil)
	_, portStr, err := net.SplitHostPort(s.addr)
	require.NoError(t, err)
	port, err := strconv.Atoi(portStr)
	require.NoError(t, err)
	before := sockstatTCPMem(t)
	by := clientFrom("127.0.0.3")

	req := "GET /check_rate?id=pipe&scale=60000&limit=1000000000 HTTP/1.1\r\nHost: x\r\n\r\n"
	batch := strings.Repeat(req, 500)
	var wg sync.WaitGroup
	var open []net.Conn
	var mu sync.Mutex
	for range conns {
		c, err := dialFrom("127.0.0.2", s.addr)
		require.NoError(t, err)
		open = append(open, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Writes stop once the sidecar stops reading: the deadline
			// ends them, and the connection stays open, unread.
			c.SetWriteDeadline(time.Now().Add(8 * time.Second))
			for range pipelined / 500 {
				if _, err := c.Write([]byte(batch)); err != nil {
					return
				}
			}
		}()
	}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range open {
			c.Close()
		}
	}()
	// The bystander is served while the attack goes on, until the
	// sidecar's write timeout (10 s) closes the unread connections.
	var peak, peakClients, peakHost int64
	var sockets int
	deadline := time.Now().Add(8 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		r, err := tryGet(by, s.base+"/check_rate?id=bystander-"+strconv.Itoa(i)+"&scale=60000&limit=10")
		require.NoError(t, err, "the bystander")
		require.Equal(t, 200, r.status, "the bystander: %s", r.body)
		b, n := socketMemory(t, ss, fmt.Sprintf("( sport = :%d )", port))
		if b > peak {
			peak, sockets = b, n
		}
		c, _ := socketMemory(t, ss, fmt.Sprintf("( dport = :%d )", port))
		peakClients = max(peakClients, c)
		peakHost = max(peakHost, sockstatTCPMem(t)-before)
		time.Sleep(250 * time.Millisecond)
	}
	wg.Wait()
	t.Logf("%d connections, %d pipelined checks each, never read: the sidecar's sockets held at most %.1f MiB (%d sockets); "+
		"the clients' own, on this host as the test runs on loopback, %.1f MiB (mostly the requests they queued and the sidecar did not read yet); "+
		"the host's TCP memory grew by at most %.1f MiB (/proc/net/sockstat: every process's, the clients' too)",
		conns, pipelined, float64(peak)/(1<<20), sockets, float64(peakClients)/(1<<20), float64(peakHost)/(1<<20))
	assert.LessOrEqual(t, peak, int64(64<<20), "kernel memory the sidecar's unread connections held")
	// Measured while every connection was open, unread.
	assert.GreaterOrEqual(t, sockets, conns)
	require.NoError(t, s.stop(t))
}

// TestAdminTokenSchemeIsCaseInsensitive: "bearer", "BEARER" and "Bearer"
// are one scheme (RFC 9110 §11.1) on every admin endpoint; another scheme,
// or the token glued to it, is not.
func TestAdminTokenSchemeIsCaseInsensitive(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the binary")
	}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600))
	pols := filepath.Join(dir, "policies.yaml")
	require.NoError(t, os.WriteFile(pols, []byte("policies:\n  - {name: p, key: 'header:K', limit: 1, scale: 1m}\n"), 0o600))
	s := start(t, nil, "-admin-token-file", tokenFile, "-policies", pols)
	for _, auth := range []string{"Bearer s3cret", "bearer s3cret", "BEARER s3cret", "bEaReR   s3cret"} {
		assert.Equal(t, 200, s.do(t, "GET", "/buckets?id=x", "", "", "Authorization", auth).status, "GET /buckets, %q", auth)
		assert.Equal(t, 200, s.do(t, "GET", "/metrics", "", "", "Authorization", auth).status, "GET /metrics, %q", auth)
		assert.Equal(t, 200, s.do(t, "POST", "/reload", "", "", "Authorization", auth).status, "POST /reload, %q", auth)
	}
	for _, auth := range []string{"", "s3cret", "Basic s3cret", "bearers3cret", "bearer s3cre", "bearer s3cret2", "bearer"} {
		assert.Equal(t, 401, s.do(t, "GET", "/buckets?id=x", "", "", "Authorization", auth).status, "GET /buckets, %q", auth)
		assert.Equal(t, 401, s.do(t, "POST", "/reload", "", "", "Authorization", auth).status, "POST /reload, %q", auth)
	}
	require.NoError(t, s.stop(t))
}

// policiesWithLimit is a policies file of one policy, p, with limit.
func policiesWithLimit(limit int) string {
	return fmt.Sprintf("policies:\n  - {name: p, key: 'header:K', limit: %d, scale: 1m}\n", limit)
}

// renameOver writes content to a file beside path and renames it over
// path, as a careful writer (and the kubelet) does.
func renameOver(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
	require.NoError(t, os.Rename(tmp, path))
}

// postReload is POST /reload with a client that gives up after 20 s (a
// hang is a failure, not a test that never ends).
func postReload(t *testing.T, s *sidecar) gwReply {
	t.Helper()
	c := clientFrom("127.0.0.1")
	c.Timeout = 20 * time.Second
	req, err := http.NewRequest("POST", s.base+"/reload", nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err, "POST /reload must answer\n%s", lastLines(s.logs(), 20))
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return gwReply{resp.StatusCode, resp.Header, string(b)}
}

// policyLimit is the limit of policy p in force, as RateLimit-Policy says.
func policyLimit(t *testing.T, s *sidecar) string {
	t.Helper()
	return s.get(t, "/check_rate?policy=p&id=probe&hits=0").header.Get("RateLimit-Policy")
}

// TestCarelessFilesFIFORenamedOver: a FIFO renamed over the policies file
// and over the RLS configuration. Unbounded, the watcher blocked in open()
// for good, holding the lock SIGHUP needed, and POST /reload hung: no edit
// applied again, nothing was logged or counted. Now each reload refuses
// it at once, says so and counts it, and the next good file applies.
func TestCarelessFilesFIFORenamedOver(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the binary")
	}
	dir := t.TempDir()
	pols := filepath.Join(dir, "policies.yaml")
	require.NoError(t, os.WriteFile(pols, []byte(policiesWithLimit(1)), 0o644))
	rlsDir := filepath.Join(dir, "rls")
	require.NoError(t, os.Mkdir(rlsDir, 0o755))
	rlsFile := filepath.Join(rlsDir, "d.yaml")
	require.NoError(t, os.WriteFile(rlsFile, []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 1}\n"), 0o644))
	s := start(t, nil, "-policies", pols, "-policies-only", "-rls-listen", "127.0.0.1:0", "-rls-config", rlsDir)
	s.listenAddr(t, "rls")

	for _, p := range []string{pols, rlsFile} {
		fifo := p + ".fifo"
		require.NoError(t, syscall.Mkfifo(fifo, 0o644))
		require.NoError(t, os.Rename(fifo, p))
	}
	polFIFO := `the rules in force stay" err="` + pols + `: is a FIFO, not a regular file"`
	rlsFIFO := `the rules in force stay" err="` + rlsFile + `: is a FIFO, not a regular file"`
	waitLog(t, s, polFIFO, 1)
	waitLog(t, s, rlsFIFO, 1)

	// SIGHUP is not held up: it tries again and says so again.
	require.NoError(t, s.Cmd.Process.Signal(syscall.SIGHUP))
	waitLog(t, s, polFIFO, 2)
	waitLog(t, s, rlsFIFO, 2)
	r := postReload(t, s)
	assert.Equal(t, 422, r.status)
	assert.Contains(t, r.body, "is a FIFO, not a regular file")
	assert.GreaterOrEqual(t, metric(t, s, `raterlimiter_policy_reloads_total{result="failed"}`), 3.0)
	assert.GreaterOrEqual(t, metric(t, s, `raterlimiter_rls_reloads_total{result="failed"}`), 2.0)
	assert.Equal(t, `"p";q=1;w=60`, policyLimit(t, s), "the rules in force stay")

	// The next good file applies.
	renameOver(t, pols, policiesWithLimit(3))
	renameOver(t, rlsFile, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 4}\n")
	waitLog(t, s, "policies reloaded", 1)
	waitLog(t, s, "rls: configuration reloaded", 1)
	assert.Equal(t, `"p";q=3;w=60`, policyLimit(t, s))

	// A configuration that drops a rule says so by name, and counts it.
	renameOver(t, rlsFile, "domain: d\ndescriptors:\n  - key: other\n    rate_limit: {unit: day, requests_per_unit: 4}\n")
	waitLog(t, s, `level=WARN msg="rls: the reloaded configuration removes rules: their descriptors are no longer limited by them" removed=[d.k]`, 1)
	assert.Equal(t, 1.0, metric(t, s, "raterlimiter_rls_rules_removed_total"))
	require.NoError(t, s.stop(t))
}

// hungMount mounts, on a directory of its own, a FUSE file system whose
// daemon never answers: every stat, open or read under it blocks, as on a
// network mount whose server went away. It needs /dev/fuse and the right
// to mount (root); elsewhere the test is skipped, never under CI=true.
func hungMount(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	fd, err := syscall.Open("/dev/fuse", syscall.O_RDWR, 0)
	if err == nil {
		err = syscall.Mount("hung", dir, "fuse.hung", syscall.MS_NOSUID|syscall.MS_NODEV,
			fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd))
		if err != nil {
			syscall.Close(fd)
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cannot mount a FUSE file system (CI=true: tests must not skip): %v", err)
		}
		t.Skipf("cannot mount a FUSE file system (needs /dev/fuse and root): %v", err)
	}
	t.Cleanup(func() {
		// Closing the device ends the connection: whatever still waits
		// on the mount gets an error and returns.
		syscall.Close(fd)
		assert.NoError(t, syscall.Unmount(dir, syscall.MNT_DETACH))
	})
	return dir
}

// TestCarelessFilesHungMount: the policies file becomes a link into a
// mount that never answers (a stale network mount). Unbounded, the watcher
// blocked for good in the read, holding the lock SIGHUP needed, and POST
// /reload hung. Now each load is abandoned after fileTimeout, logged and
// counted; SIGHUP and POST /reload answer; and the next good file applies.
func TestCarelessFilesHungMount(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the binary")
	}
	mnt := hungMount(t)
	dir := t.TempDir()
	pols := filepath.Join(dir, "policies.yaml")
	require.NoError(t, os.WriteFile(pols, []byte(policiesWithLimit(1)), 0o644))
	s := start(t, nil, "-policies", pols, "-policies-only")

	require.NoError(t, os.Symlink(filepath.Join(mnt, "policies.yaml"), pols+".new"))
	require.NoError(t, os.Rename(pols+".new", pols))
	hung := `not read within 5s (a hung network mount?), abandoned`
	waitLog(t, s, hung, 1)
	require.NoError(t, s.Cmd.Process.Signal(syscall.SIGHUP))
	t0 := time.Now()
	r := postReload(t, s)
	assert.Equal(t, 422, r.status)
	assert.Contains(t, r.body, hung)
	assert.Less(t, time.Since(t0), 15*time.Second, "POST /reload waits for its own read only")
	waitLog(t, s, `msg="SIGHUP: policies not reloaded"`, 1)
	assert.GreaterOrEqual(t, metric(t, s, `raterlimiter_policy_reloads_total{result="failed"}`), 3.0)
	assert.Equal(t, `"p";q=1;w=60`, policyLimit(t, s), "the rules in force stay")

	renameOver(t, pols, policiesWithLimit(3))
	waitLog(t, s, "policies reloaded", 1)
	assert.Equal(t, `"p";q=3;w=60`, policyLimit(t, s))
	require.NoError(t, s.stop(t))
}

// peakRSS is the most resident memory process pid has held since
// resetPeakRSS (VmHWM).
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^VmHWM:\s+(\d+) kB`).FindSubmatch(b)
	require.NotNil(t, m)
	kb, err := strconv.ParseInt(string(m[1]), 10, 64)
	require.NoError(t, err)
	return kb << 10
}

// resetPeakRSS starts peakRSS anew from the resident memory now.
func resetPeakRSS(t *testing.T, pid int) {
	t.Helper()
	require.NoError(t, os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0))
}

// refusedWithin waits for want in the sidecar's log, failing the test
// early when the sidecar's peak memory grows by more than bound meanwhile
// (unbounded, a read of /dev/zero grows without end). It returns the
// growth of the peak over rss.
func refusedWithin(t *testing.T, s *sidecar, want string, rss, bound int64) int64 {
	t.Helper()
	pid := s.Cmd.Process.Pid
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(s.logs(), want) {
		if grown := peakRSS(t, pid) - rss; grown > bound || time.Now().After(deadline) {
			t.Fatalf("%q not logged; the sidecar's memory grew by %s MiB\n%s", want, mib(float64(grown)), lastLines(s.logs(), 10))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return peakRSS(t, pid) - rss
}

// TestCarelessFilesMemoryIsBounded: a link to /dev/zero renamed over the
// policies file (Stat says 0 bytes; the read never ends: 166 MB to 1.5 GB
// in 11 s), and a 20 MB RLS configuration (parsed whole, 23 MB to 1.1-2.0
// GB, kept after it was refused). Each is refused with the sidecar's
// resident memory growing by at most 100 MB, and given back; a policies
// file at its bound, of the shape that costs the YAML parser most, too.
func TestCarelessFilesMemoryIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the binary")
	}
	const bound = 100 << 20
	dir := t.TempDir()
	pols := filepath.Join(dir, "policies.yaml")
	require.NoError(t, os.WriteFile(pols, []byte(policiesWithLimit(1)), 0o644))
	rlsFile := filepath.Join(dir, "rls.yaml")
	require.NoError(t, os.WriteFile(rlsFile, []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 1}\n"), 0o644))
	s := start(t, nil, "-policies", pols, "-policies-only", "-rls-listen", "127.0.0.1:0", "-rls-config", rlsFile)
	s.listenAddr(t, "rls")
	pid := s.Cmd.Process.Pid

	settle := func() int64 {
		time.Sleep(500 * time.Millisecond)
		rss, err := readRSS(pid)
		require.NoError(t, err)
		resetPeakRSS(t, pid)
		return rss
	}

	rss := settle()
	require.NoError(t, os.Symlink("/dev/zero", pols+".new"))
	require.NoError(t, os.Rename(pols+".new", pols))
	grown := refusedWithin(t, s, pols+`: is a character device, not a regular file`, rss, bound)
	t.Logf("a link to /dev/zero: refused, the peak grew by %s MiB", mib(float64(grown)))

	rss = settle()
	var big strings.Builder
	big.WriteString("domain: d\ndescriptors:\n")
	for i := 0; big.Len() < 20<<20; i++ {
		fmt.Fprintf(&big, "  - key: k%d\n    rate_limit: {unit: day, requests_per_unit: 1}\n", i)
	}
	renameOver(t, rlsFile, big.String())
	grown = refusedWithin(t, s, fmt.Sprintf("%s: is %d bytes; at most 1048576 are read", rlsFile, big.Len()), rss, bound)
	t.Logf("a 20 MB RLS configuration: refused, the peak grew by %s MiB", mib(float64(grown)))

	// At the bound: one flow sequence of 1 MiB, the shape whose parse
	// takes the most (about 127 bytes a byte), refused once parsed: the
	// bound of a parse is about 110 MB.
	rss = settle()
	worst := "policies: [" + strings.Repeat("a,", (1<<20-16)/2) + "a]\n"
	require.LessOrEqual(t, len(worst), 1<<20)
	renameOver(t, pols, worst)
	grown = refusedWithin(t, s, pols+`:1: 524281 policies; at most 1000`, rss, 128<<20)
	after := settledRSS(t, s, rss+16<<20)
	t.Logf("a policies file at its bound (1 MiB), parsed and refused: the peak grew by %s MiB; %s MiB after, %s MiB before",
		mib(float64(grown)), mib(float64(after)), mib(float64(rss)))
	assert.LessOrEqual(t, after, rss+16<<20, "the memory of a parse is given back")

	assert.Equal(t, `"p";q=1;w=60`, policyLimit(t, s), "the rules in force stay")
	require.NoError(t, s.stop(t))
}

// TestCarelessFilesDirectoryRecreated: a redeploy replaces the directory
// that holds the policies file. Unbounded, its watch went with it and was
// never made again: SIGHUP loaded once, later edits never. Now the
// directory's parent sees it made again, and it is watched anew.
func TestCarelessFilesDirectoryRecreated(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the binary")
	}
	dir := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.Mkdir(dir, 0o755))
	pols := filepath.Join(dir, "policies.yaml")
	require.NoError(t, os.WriteFile(pols, []byte(policiesWithLimit(1)), 0o644))
	s := start(t, nil, "-policies", pols, "-policies-only")

	require.NoError(t, os.RemoveAll(dir))
	waitLog(t, s, "policies not reloaded", 1)
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.WriteFile(pols, []byte(policiesWithLimit(2)), 0o644))
	waitLog(t, s, "policies reloaded", 1)
	assert.Equal(t, `"p";q=2;w=60`, policyLimit(t, s))

	// And the next edit, in the new directory, is seen too.
	renameOver(t, pols, policiesWithLimit(3))
	waitLog(t, s, "policies reloaded", 2)
	assert.Equal(t, `"p";q=3;w=60`, policyLimit(t, s))
	require.NoError(t, s.stop(t))
}

// startAsNobody is start with the sidecar run as the user nobody (uid
// 65534), for a test of permissions, which root does not heed. It needs
// root and setpriv; elsewhere the test is skipped, never under CI=true.
func startAsNobody(t *testing.T, args ...string) *sidecar {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root to run the sidecar as another user (CI=true: tests must not skip)")
		}
		t.Skip("needs root to run the sidecar as another user")
	}
	setpriv := tooltest.Need(t, "setpriv", "util-linux")
	bin := build(t)
	require.NoError(t, os.Chmod(filepath.Dir(bin), 0o755))
	s := &sidecar{Proc: tooltest.Start(t, nil, setpriv, append([]string{"--reuid=65534", "--regid=65534", "--clear-groups",
		bin, "-listen", "127.0.0.1:0"}, args...)...)}
	s.addr = s.waitAddr(t, "raterlimiter", 30*time.Second)
	s.base = "http://" + s.addr
	return s
}

// TestCarelessFilesPermissionsFixed: a file renamed over the policies with
// mode 000, then made readable. Unbounded, the change of permissions was
// ignored: the file stayed unloaded until its next change of contents.
func TestCarelessFilesPermissionsFixed(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the binary")
	}
	dir := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.Mkdir(dir, 0o755))
	for d := dir; d != os.TempDir(); d = filepath.Dir(d) {
		require.NoError(t, os.Chmod(d, 0o755))
	}
	pols := filepath.Join(dir, "policies.yaml")
	require.NoError(t, os.WriteFile(pols, []byte(policiesWithLimit(1)), 0o644))
	s := startAsNobody(t, "-policies", pols, "-policies-only")

	require.NoError(t, os.WriteFile(pols+".new", []byte(policiesWithLimit(3)), 0o000))
	require.NoError(t, os.Rename(pols+".new", pols))
	waitLog(t, s, "permission denied", 1)
	assert.Equal(t, `"p";q=1;w=60`, policyLimit(t, s))

	require.NoError(t, os.Chmod(pols, 0o644))
	waitLog(t, s, "policies reloaded", 1)
	assert.Equal(t, `"p";q=3;w=60`, policyLimit(t, s))
	require.NoError(t, s.stop(t))
}

// TestCarelessFilesPartialWrite: the policies file written in place in two
// steps 300 ms apart, cut at a policy's boundary, which is valid YAML.
// Unbounded (a quiet period of 200 ms), the first half loaded: the policy
// not written yet was gone, its requests unlimited, until the rest came.
// Now the file is read once it has been quiet for a second. A reload that
// does remove a policy names it at WARN and counts it.
func TestCarelessFilesPartialWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the binary")
	}
	dir := t.TempDir()
	pols := filepath.Join(dir, "policies.yaml")
	const a = "policies:\n  - {name: a, key: 'header:K', limit: 100, scale: 1m}\n"
	const b = "  - {name: b, key: 'header:K', limit: 5, scale: 1m}\n"
	require.NoError(t, os.WriteFile(pols, []byte(a+b), 0o644))
	s := start(t, nil, "-policies", pols, "-policies-only")
	awayFromMinuteEnd(20 * time.Second)
	for range 5 {
		require.Equal(t, 200, s.get(t, "/check_rate?policy=b&id=k").status)
	}
	require.Equal(t, 429, s.get(t, "/check_rate?policy=b&id=k").status)

	// Written in place, as a script or a careless editor does.
	f, err := os.OpenFile(pols, os.O_WRONLY|os.O_TRUNC, 0)
	require.NoError(t, err)
	_, err = f.WriteString(a)
	require.NoError(t, err)
	seen := map[int]int{}
	for range 6 {
		time.Sleep(50 * time.Millisecond)
		seen[s.get(t, "/check_rate?policy=b&id=k").status]++
	}
	_, err = f.WriteString(b)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	// Well after the quiet period: what loaded is the whole file.
	waitLog(t, s, "policies reloaded", 1)
	for range 4 {
		seen[s.get(t, "/check_rate?policy=b&id=k").status]++
	}
	assert.Equal(t, map[int]int{429: 10}, seen, "b denied throughout, never unknown (400) or let through (200)")
	assert.NotContains(t, s.logs(), "removes policies")

	// A file that does remove b: said at WARN, by name, and counted.
	renameOver(t, pols, a)
	waitLog(t, s, `level=WARN msg="the reloaded policies file removes policies: the requests they matched are no longer limited by them" removed=[b]`, 1)
	assert.Equal(t, 1.0, metric(t, s, "raterlimiter_policies_removed_total"))
	require.NoError(t, s.stop(t))
}

// TestReloadKeepsWhatTheDocsSay: a policy that keeps its name, scale and
// algo keeps its counts across a reload (a new limit applies to them); a
// new scale or algo starts fresh windows, as docs/gateways.md says.
// Unbounded, the docs promised the counts of every policy that kept its
// name, and a new scale gave every key a fresh window (3 more through a
// spent limit of 3).
func TestReloadKeepsWhatTheDocsSay(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the binary")
	}
	doc, err := os.ReadFile("../../docs/gateways.md")
	require.NoError(t, err)
	const says = "Counters are kept by (policy name, key) and the window: a policy that keeps its name, scale and algo keeps its counts across a reload, under its new limit if that changed; a new scale or algo starts its counts afresh: every key gets a full window again."
	assert.True(t, strings.Contains(strings.Join(strings.Fields(string(doc)), " "), says), "docs/gateways.md says: %s", says)

	dir := t.TempDir()
	pols := filepath.Join(dir, "policies.yaml")
	pol := func(limit int, scale, algo string) string {
		return fmt.Sprintf("policies:\n  - {name: p, key: 'header:K', limit: %d, scale: %s, algo: %s}\n", limit, scale, algo)
	}
	require.NoError(t, os.WriteFile(pols, []byte(pol(3, "1h", "fixed")), 0o644))
	s := start(t, nil, "-policies", pols, "-policies-only")
	check := func() int { return s.get(t, "/check_rate?policy=p&id=k").status }
	reloaded := 0
	reload := func(content string) {
		renameOver(t, pols, content)
		reloaded++
		waitLog(t, s, "policies reloaded", reloaded)
	}
	for range 3 {
		require.Equal(t, 200, check())
	}
	require.Equal(t, 429, check())

	reload(pol(5, "1h", "fixed"))
	assert.Equal(t, 200, check(), "the count kept (4 counted, the denied one too), 5 of 5")
	assert.Equal(t, 429, check())

	reload(pol(5, "2h", "fixed"))
	assert.Equal(t, 200, check(), "a new scale: a fresh window")

	reload(pol(5, "2h", "sliding"))
	for range 5 {
		assert.Equal(t, 200, check(), "a new algo: a fresh window")
	}
	assert.Equal(t, 429, check())
	require.NoError(t, s.stop(t))
}

// TestGatewayHeldAnswerOutlivesTheProxy: a policy with wait: true behind
// nginx with the fail-open snippets. Every snippet of docs/gateways/ waits
// for the sidecar's answer longer than -max-wait, and says why. With the
// proxy's read timeout above -max-wait (here 3 s over 2 s, the docs' 15 s
// over 10 s scaled down), every held answer comes back in its turn and
// nothing passes through the fail-open path. Below it, what
// docs/gateways.md says happens: nginx gives up on held answers (504,
// "upstream timed out"), and the fail-open snippet lets those requests
// through before their turn, their checks counted all the same. Unbounded,
// the snippets set no read timeout and the docs said nothing of it: with
// one below -max-wait, 11 requests reached the app where about 4 were
// allowed.
func TestGatewayHeldAnswerOutlivesTheProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("drives nginx")
	}
	maxWait := 10 * time.Second // -max-wait's default
	readTimeout := func(re, conf string) time.Duration {
		m := regexp.MustCompile(re).FindStringSubmatch(conf)
		require.NotNil(t, m, "%s sets no read timeout:\n%s", re, conf)
		d, err := time.ParseDuration(m[1])
		require.NoError(t, err)
		return d
	}
	nginxConf := docFile(t, "nginx.conf")
	assert.Greater(t, readTimeout(`(?m)^\s*proxy_read_timeout (\d+s);`, nginxConf), maxWait, "nginx.conf")
	assert.Greater(t, readTimeout(`(?m)^\s*response_header_timeout (\d+s)`, docFile(t, "Caddyfile")), maxWait, "Caddyfile")
	assert.Greater(t, readTimeout(`(?m)^\s*# ForwardAuth waits (\d+s) for the answer`, docFile(t, "traefik-dynamic.yml")), maxWait, "traefik-dynamic.yml")
	for _, name := range []string{"nginx.conf", "Caddyfile", "traefik-dynamic.yml"} {
		assert.Contains(t, docFile(t, name), "-max-wait (10s by default)", "%s says why", name)
	}
	require.Equal(t, 10*time.Second, maxWait, "the docs name the default")

	policies := filepath.Join(t.TempDir(), "policies.yaml")
	require.NoError(t, os.WriteFile(policies, []byte(`trusted_proxies: [127.0.0.1]
policies:
  - name: turns
    match: {path_prefix: /slow/}
    key: header:X-Api-Key
    algo: leaky
    limit: 2
    scale: 1s
    queue: 100
    wait: true
`), 0o600))
	for _, tc := range []struct {
		name    string
		timeout string
		timeOut bool // nginx gives up on held answers
	}{
		{"read timeout above -max-wait, as documented", "3s", false},
		{"read timeout below -max-wait", "1s", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var nginxDir string
			g := gateway{name: "nginx", start: func(t *testing.T, proxy, sidecar, app int) {
				conf := nginxFailOpen(t)
				require.Contains(t, conf, "proxy_read_timeout 15s;")
				conf = strings.Replace(conf, "proxy_read_timeout 15s;", "proxy_read_timeout "+tc.timeout+";", 1)
				nginxDir = startNginx(t, ports(conf, proxy, sidecar, app), proxy)
			}}
			base, sc := startGatewayWith(t, g, policies, "-max-wait", "2s")
			// Six at once: one leaves every 500 ms, so the first five wait
			// 0 to 2 s, within -max-wait, and the sixth (2.5 s) is denied
			// at once.
			type answer struct {
				r   gwReply
				err error
			}
			answers := make(chan answer, 6)
			for range 6 {
				go func() {
					r, err := tryGet(clientFrom("127.0.0.1"), base+"/slow/x", "X-Api-Key", "k")
					answers <- answer{r, err}
				}()
			}
			statuses := map[int]int{}
			for range 6 {
				a := <-answers
				require.NoError(t, a.err)
				if reachedApp(a.r) {
					statuses[200]++
				} else {
					statuses[a.r.status]++
				}
			}
			assert.Equal(t, map[int]int{200: 5, 429: 1}, statuses, "five in their turn, the sixth denied")
			assert.Equal(t, 5.0, metric(t, sc, `raterlimiter_policy_checks_total{policy="turns",result="allowed"}`), "five checks counted")
			log, err := os.ReadFile(filepath.Join(nginxDir, "error.log"))
			require.NoError(t, err)
			timedOut := strings.Count(string(log), "upstream timed out")
			if tc.timeOut {
				assert.Positive(t, timedOut, "nginx gave up on held answers, and the fail-open snippet let them through")
			} else {
				assert.Zero(t, timedOut, "every held answer came back in its turn\n%s", log)
			}
			t.Logf("%s: %d of the held answers outlived nginx's proxy_read_timeout %s", tc.name, timedOut, tc.timeout)
		})
	}
}

// TestCarelessFilesTLSKeyIsAFIFO: a FIFO renamed over -tls-key. It is
// refused at once, logged and counted; the certificate in force is still
// served; and the next good pair is taken.
func TestCarelessFilesTLSKeyIsAFIFO(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the binary")
	}
	dir := t.TempDir()
	first := newPKI(t, dir, "first", 1)
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	copyFile(t, first.certFile, cert)
	copyFile(t, first.keyFile, key)
	s := start(t, nil, "-tls-cert", cert, "-tls-key", key)
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: first.pool}}}
	failed := func() string {
		resp, err := c.Get("https://" + s.addr + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return regexp.MustCompile(`(?m)^raterlimiter_tls_reloads_total\{file="tls-cert",result="failed"\} (\d+)$`).FindString(string(b))
	}

	require.NoError(t, syscall.Mkfifo(key+".fifo", 0o600))
	require.NoError(t, os.Rename(key+".fifo", key))
	waitLog(t, s, key+" is a FIFO, not a regular file", 1)
	assert.Equal(t, `raterlimiter_tls_reloads_total{file="tls-cert",result="failed"} 1`, failed())
	assert.Equal(t, 0, servedSerial(t, s.addr).Cmp(first.serial), "the pair in force is served")

	second := newPKI(t, dir, "second", 2)
	copyFile(t, second.certFile, cert)
	copyFile(t, second.keyFile, key)
	require.Eventually(t, func() bool { return servedSerial(t, s.addr).Cmp(second.serial) == 0 }, 20*time.Second, 20*time.Millisecond)
	require.NoError(t, s.stop(t))
}

// TestCarelessFilesAtStart: at start, a file that is not a regular one
// stops the start at once (exit status 2, naming it), where a FIFO blocked
// it for good and /dev/zero grew it without end; -check-policies and
// -check-rls-config say the same.
func TestCarelessFilesAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("drives the binary")
	}
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	zero := filepath.Join(dir, "zero.yaml")
	require.NoError(t, os.Symlink("/dev/zero", zero))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-policies", fifo}, fifo + ": is a FIFO, not a regular file"},
		{[]string{"-policies", zero}, zero + ": is a character device, not a regular file"},
		{[]string{"-check-policies", fifo}, fifo + ": is a FIFO, not a regular file"},
		{[]string{"-rls-listen", "127.0.0.1:0", "-rls-config", zero}, zero + ": is a character device, not a regular file"},
		{[]string{"-check-rls-config", fifo}, fifo + ": is a FIFO, not a regular file"},
		{[]string{"-snapshot", fifo}, "snapshot: " + fifo + " is a FIFO, not a regular file"},
		{[]string{"-admin-token-file", zero}, zero + " is a character device, not a regular file"},
	} {
		code, _, stderr := runBinary(t, nil, append([]string{"-listen", "127.0.0.1:0"}, tc.args...)...)
		assert.NotEqual(t, 0, code, "%v", tc.args)
		assert.Contains(t, stderr, tc.want, "%v", tc.args)
	}
}
