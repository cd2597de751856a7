package redisbackend

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rl "github.com/raterlimiter/raterlimiter"
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
		tag := keyTag(DefaultPrefix, id)
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
		m, err := ParseFailMode(s)
		if err != nil {
			assert.True(t, errors.Is(err, rl.ErrInvalid), "%v", err)
			return
		}
		if s == "" {
			assert.Equal(t, FailClosed, m)
			return
		}
		assert.Equal(t, s, m.String())
	})
}
