package redisbackend

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

// hashTag returns what Redis Cluster hashes of key: the bytes between the
// first '{' and the first '}' after it, when that is not empty; else the key.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return key
	}
	return key[open+1 : open+1+end]
}

// FuzzKeyTag: for an id of any bytes, every key of the id hashes on exactly
// the encoded id (so all its keys share a slot), and the encoding is
// reversible (so two ids never share keys).
func FuzzKeyTag(f *testing.F) {
	for _, id := range []string{"u", "{", "}", "{}", "a}b{c", "\x00\xff", "ü", strings.Repeat("{", 10)} {
		f.Add(id)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if id == "" {
			t.Skip("ids are not empty")
		}
		tag := string(appendTag(nil, defaultPrefix, id))
		for _, key := range []string{tag + "i", tag + field(codeOf(rl.Sliding), 1000, 0), tag + field(codeOf(rl.Slices), 1000, 60), tag + field(fixedCode, 1000, 0) + ":1"} {
			h := hashTag(key)
			require.NotEqual(t, key, h, "the key has a hash tag")
			back, err := base64.RawURLEncoding.DecodeString(h)
			require.NoError(t, err)
			assert.Equal(t, id, string(back))
		}
	})
}

// FuzzParseFailMode: every string is either a mode that prints back as
// itself, or an error matching ErrInvalid.
func FuzzParseFailMode(f *testing.F) {
	for _, s := range []string{"", "closed", "open", "local", "Open", "fail", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := check.ParseFailMode("redis-fail", s)
		if err != nil {
			assert.True(t, errors.Is(err, rl.ErrInvalid), "%v", err)
			return
		}
		if s == "" {
			assert.Equal(t, rl.FailClosed, m)
			return
		}
		assert.Equal(t, s, m.String())
	})
}

// FuzzParseField: an index field read back from Redis (any bytes, as
// another version or a hand-made key could leave) is either refused or
// names a record whose field, written again, is the same string, so a
// listing or a reset never reads or deletes another record's key.
func FuzzParseField(f *testing.F) {
	for _, s := range []string{"f:1000", "w:60000", "g:1", "l:5", "n:60000:60", "k:1000", "n:60000", "w:60000:60",
		"n:1:2", "n:1:601", "n:1:1", "x:1000", "f:0", "f:-1", "f:01", "n:10:060", ":", "", "f:1000:3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, scale, sub, ok := parseField(s)
		if !ok {
			return
		}
		assert.Positive(t, scale)
		if a == rl.Slices {
			assert.True(t, sub >= check.MinSlices && sub <= check.MaxSlices, "slice count %d", sub)
		} else {
			assert.Zero(t, sub)
		}
		assert.Equal(t, s, field(codeOf(a), scale, sub), "the field written again")
	})
}

// checkMS is CheckRate in milliseconds, for the tests that compare it with
// package algo.
func (b *Backend) checkMS(ctx context.Context, r millis.Request) (millis.Decision, error) {
	d, err := b.CheckRate(ctx, r.Public())
	return millis.OfDecision(d), err
}

// checkRatesMS is CheckRates in milliseconds.
func (b *Backend) checkRatesMS(ctx context.Context, rs []millis.Request) ([]millis.Decision, error) {
	pub := make([]rl.Request, len(rs))
	for i, r := range rs {
		pub[i] = r.Public()
	}
	ds, err := b.CheckRates(ctx, pub)
	out := make([]millis.Decision, len(ds))
	for i, d := range ds {
		out[i] = millis.OfDecision(d)
	}
	return out, err
}
