package redisbackend

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"

	"github.com/redis/rueidis"

	rl "github.com/raterlimiter/raterlimiter"
)

//go:embed check.lua
var checkLua string

//go:embed records.lua
var recordsLua string

// script is a Lua script and its SHA1, for EVALSHA.
type script struct{ body, sha string }

func newScript(body string) script {
	sum := sha1.Sum([]byte(body))
	return script{body: body, sha: hex.EncodeToString(sum[:])}
}

func algoCode(a rl.Algo) string {
	switch a {
	case rl.Sliding:
		return "s"
	case rl.Token:
		return "t"
	case rl.Log:
		return "l"
	case rl.Leaky:
		return "q"
	}
	return "f"
}

func parseAlgoCode(s string) (rl.Algo, bool) {
	switch s {
	case "f":
		return rl.Fixed, true
	case "s":
		return rl.Sliding, true
	case "t":
		return rl.Token, true
	case "l":
		return rl.Log, true
	case "q":
		return rl.Leaky, true
	}
	return 0, false
}

// tag returns the prefix of every key of id: PREFIX:{base64url(id)}: — the
// hash tag keeps an id's keys in one Cluster slot, and base64url has no
// braces, so any bytes of id are safe.
func (b *Backend) tag(id string) string { return keyTag(b.cfg.Prefix, id) }

func keyTag(prefix, id string) string {
	return prefix + ":{" + base64.RawURLEncoding.EncodeToString([]byte(id)) + "}:"
}

// field names the record hash of (algo, scale) in an id's index; the hash's
// key is the id's tag followed by it.
func field(a rl.Algo, scale int64) string { return algoCode(a) + ":" + strconv.FormatInt(scale, 10) }

func (b *Backend) now() string {
	if b.cfg.Clock == nil {
		return ""
	}
	return strconv.FormatInt(b.cfg.Clock(), 10)
}

func (b *Backend) checkArgs(r rl.Request, now, deadline string) (keys, args []string) {
	// Both keys and the field from one buffer: PREFIX:{ID}:ALGO:SCALE, the
	// index PREFIX:{ID}:i, the field ALGO:SCALE.
	var stack [128]byte
	buf := append(stack[:0], b.cfg.Prefix...)
	buf = append(buf, ":{"...)
	buf = base64.RawURLEncoding.AppendEncode(buf, []byte(r.ID))
	buf = append(buf, "}:"...)
	tagLen := len(buf)
	buf = append(buf, algoCode(r.Algo)...)
	buf = append(buf, ':')
	buf = strconv.AppendInt(buf, r.Scale, 10)
	key := string(buf)
	index := string(append(buf[:tagLen], 'i'))
	f := key[tagLen:]
	keys = []string{key, index}
	args = []string{algoCode(r.Algo), f[2:], strconv.FormatInt(r.Limit, 10),
		strconv.FormatInt(r.Hits, 10), now, f, b.slack, deadline}
	return keys, args
}

func evalsha(c rueidis.Client, s script, keys, args []string) rueidis.Completed {
	return c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

func eval(c rueidis.Client, s script, keys, args []string) rueidis.Completed {
	return c.B().Eval().Script(s.body).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// stale reports whether err is not this call's: the client answers
// context.DeadlineExceeded, without sending, to every call on a connection it
// dropped when an earlier call's deadline passed during a synchronous
// exchange. A call whose own deadline (ctx, the earliest of the caller's and
// the backend's) has not passed cannot have timed out itself, so its script
// never left and sending it again cannot count it twice. (A connection the
// client drops because its keep-alive went unanswered fails its calls with
// os.ErrDeadlineExceeded instead; those may have been sent and are not
// stale.)
func stale(ctx context.Context, err error) bool {
	return errors.Is(err, context.DeadlineExceeded) && !expired(ctx)
}

func isNoScript(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && re.IsNoScript()
}

// run sends one script per item (keys and args of item i from kv), pipelined
// (a single one with the other callers' waiting single ones, combine.go);
// sends again, once, those that failed on a connection an earlier call's
// deadline had dropped (stale); and sends again with EVAL, in order, those
// that found no script loaded.
func (b *Backend) run(ctx context.Context, s script, n int, kv func(i int) (keys, args []string)) []rueidis.RedisResult {
	c := b.conn()
	if c == nil {
		res := make([]rueidis.RedisResult, n)
		for i := range res {
			res[i] = rueidis.NewErrorResult(errNotConnected)
		}
		return res
	}
	cmds := make(rueidis.Commands, n)
	for i := range n {
		k, a := kv(i)
		cmds[i] = evalsha(c, s, k, a)
	}
	send := func(cmds rueidis.Commands) []rueidis.RedisResult {
		if len(cmds) == 1 {
			return []rueidis.RedisResult{b.doCombined(ctx, cmds[0])}
		}
		return c.DoMulti(ctx, cmds...)
	}
	res := send(cmds)
	// resend sends again, built by cmd and in order, the items whose answer
	// matches.
	resend := func(match func(error) bool, cmd func(rueidis.Client, script, []string, []string) rueidis.Completed) {
		var again []int
		for i := range res {
			if match(res[i].Error()) {
				again = append(again, i)
			}
		}
		if len(again) == 0 {
			return
		}
		retry := make(rueidis.Commands, len(again))
		for j, i := range again {
			k, a := kv(i)
			retry[j] = cmd(c, s, k, a)
		}
		for j, r := range send(retry) {
			res[again[j]] = r
		}
	}
	resend(func(err error) bool { return stale(ctx, err) }, evalsha)
	resend(isNoScript, eval)
	return res
}
