package redisbackend

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"strconv"

	"github.com/redis/rueidis"
)

// script is a Lua script and its SHA1, for EVALSHA.
type script struct{ body, sha string }

func newScript(body string) *script {
	sum := sha1.Sum([]byte(body))
	return &script{body: body, sha: hex.EncodeToString(sum[:])}
}

// tag returns the prefix of every key of id: PREFIX:{base64url(id)}: — the
// hash tag keeps an id's keys in one Cluster slot, and base64url has no
// braces, so any bytes of id are safe.
func (b *Backend) tag(id string) string { return string(appendTag(nil, b.cfg.Prefix, id)) }

// appendTag appends id's tag to buf.
func appendTag(buf []byte, prefix, id string) []byte {
	buf = append(buf, prefix...)
	buf = append(buf, ":{"...)
	buf = base64.RawURLEncoding.AppendEncode(buf, []byte(id))
	return append(buf, "}:"...)
}

// field names the record of (code, scale, sub) in an id's index (sub 0:
// none, subOf); a record's key is the id's tag followed by it (and, for
// fixed windows, by ":WINDOW").
func field(code string, scale, sub int64) string {
	return string(appendField(nil, code, scale, sub))
}

// appendField appends field(code, scale, sub) to buf.
func appendField(buf []byte, code string, scale, sub int64) []byte {
	buf = append(buf, code...)
	buf = append(buf, ':')
	buf = strconv.AppendInt(buf, scale, 10)
	if sub != 0 {
		buf = append(buf, ':')
		buf = strconv.AppendInt(buf, sub, 10)
	}
	return buf
}

// packArgs packs a check script's arguments as its ARGV[1]: little-endian
// doubles (Lua's struct '<d...'), exact for integers below 2^53. Redis
// parses one packed argument for less than it turns one decimal into a
// number.
func packArgs(xs ...int64) string {
	buf := make([]byte, 8*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(float64(x)))
	}
	return string(buf)
}

// unpack reads n little-endian doubles, as a script packs its record.
func unpack(s string, n int) ([]int64, bool) {
	if len(s) != 8*n {
		return nil, false
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(math.Float64frombits(binary.LittleEndian.Uint64([]byte(s[8*i : 8*i+8]))))
	}
	return out, true
}

// op is what a call sends.
type op uint8

const (
	opScript   op = iota // the call's script: EVALSHA, or EVAL after NOSCRIPT
	opCreate             // SET key 0 NX PX ttl: a fixed window's counter, with its expiry
	opIncr               // INCRBY key n
	opGet                // GET key
	opSaturate           // SET key 2^63-1 XX PX ttl: a counter INCRBY could not raise
)

// call is one command to Redis. Commands are built again when sent again
// (rueidis recycles a command once sent), so a call holds what builds it.
type call struct {
	op     op
	s      *script
	key    string
	args   []string // the script's
	n, ttl int64    // INCRBY's increment; the TTL in ms of opCreate and opSaturate
	// fallback is what to send instead when the script refuses: the ids'
	// indexes of records whose kind the registry could not list (kinds.go).
	fallback []call
}

func (c *call) build(cl rueidis.Client, eval bool) rueidis.Completed {
	switch c.op {
	case opCreate:
		return cl.B().Set().Key(c.key).Value("0").Nx().PxMilliseconds(c.ttl).Build()
	case opIncr:
		return cl.B().Incrby().Key(c.key).Increment(c.n).Build()
	case opGet:
		return cl.B().Get().Key(c.key).Build()
	case opSaturate:
		return cl.B().Set().Key(c.key).Value(maxCount).Xx().PxMilliseconds(c.ttl).Build()
	}
	if eval {
		return cl.B().Eval().Script(c.s.body).Numkeys(1).Key(c.key).Arg(c.args...).Build()
	}
	return cl.B().Evalsha().Sha1(c.s.sha).Numkeys(1).Key(c.key).Arg(c.args...).Build()
}

// maxCount is 2^63-1, where a fixed window's counter saturates.
const maxCount = "9223372036854775807"

// stale reports whether err is not this call's: the client answers
// context.DeadlineExceeded, without sending, to every call on a connection it
// dropped when an earlier call's deadline passed during a synchronous
// exchange. A call whose own deadline (ctx, the earliest of the caller's and
// the backend's) has not passed cannot have timed out itself, so its command
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

// run sends calls, pipelined (a single check's with the other callers'
// waiting single checks, combine.go; on a Cluster, to each node its share);
// sends again, once, those that failed on a connection an earlier call's
// deadline had dropped (stale); and sends again with EVAL, in order, the
// scripts that found themselves not loaded.
func (b *Backend) run(ctx context.Context, calls []call, combine bool) []rueidis.RedisResult {
	c := b.conn()
	if c == nil {
		return errorResults(len(calls), errNotConnected)
	}
	cmds := make(rueidis.Commands, len(calls))
	for i := range calls {
		cmds[i] = calls[i].build(c, false)
	}
	send := func(cmds rueidis.Commands) []rueidis.RedisResult {
		if combine {
			return b.doCombined(ctx, cmds)
		}
		return c.DoMulti(ctx, cmds...)
	}
	res := send(cmds)
	// resend sends again, in order, the calls whose answer matches.
	resend := func(match func(error) bool, eval bool) {
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
			retry[j] = calls[i].build(c, eval)
		}
		for j, r := range send(retry) {
			res[again[j]] = r
		}
	}
	resend(func(err error) bool { return stale(ctx, err) }, false)
	resend(isNoScript, true)
	return res
}
