package policy

import (
	"bytes"
	"errors"
	"strconv"
)

// ErrBadPath is returned by CleanPath for a request target that cannot be
// read as a path: a percent sign not followed by two hex digits, a raw
// "#", or a target that is neither a path, nor an absolute URI, nor "*".
// /auth denies such a request rather than match it against nothing.
var ErrBadPath = errors.New("policy: the request's path cannot be decoded")

// Path is a request's path as matching sees it: what a backend may serve
// it as, whichever way the backend reads paths. Match a prefix with
// HasPrefix.
type Path struct {
	// Resolved is the path decoded and cleaned, "." and ".." segments
	// resolved.
	Resolved []byte
	// Written is the same path with its "." and ".." segments kept as
	// written, or nil when it equals Resolved. Backends that serve
	// "/api/../x" from their /api/ handler exist; so do backends that
	// serve "/x/../api/x" as "/api/x". A prefix that matches either form
	// matches.
	Written []byte
}

// HasPrefix reports whether prefix (a path_prefix: a clean path) begins
// either form of p, ASCII letters compared without case.
func (p *Path) HasPrefix(prefix string) bool {
	return hasPrefixFold(p.Resolved, prefix) || (p.Written != nil && hasPrefixFold(p.Written, prefix))
}

func hasPrefixFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && equalFoldASCII(b[:len(prefix)], prefix)
}

// CleanPath reads a request target (the request line's, or a proxy's
// X-Original-URI or X-Forwarded-Uri) into p, as a backend may serve it:
//
//   - the query ("?...") is dropped; an absolute URI ("http://host/path")
//     keeps its path only;
//   - a raw "#" anywhere is refused: clients never send a fragment, and
//     backends disagree on it (nginx cuts the path there, Go's net/http
//     keeps it as a path byte, so "/x#/../api/x" is served as "/api/x");
//     an escaped one ("%23") is a path byte like any other;
//   - every percent escape is decoded ("%61" is "a", "%2F" is "/"): nginx
//     and Go's net/http decode them all before routing;
//   - a backslash is a slash, as some backends read it;
//   - runs of slashes are one slash;
//   - each segment loses its parameters: from ";" to the segment's end
//     ("/api;a=b/x" is "/api/x");
//   - "." and ".." segments are resolved in Resolved (".." never climbs
//     above the root) and kept in Written;
//   - a trailing slash stays.
//
// Letters keep their case: HasPrefix ignores it. A target that cannot be
// read fails with ErrBadPath. The forms are written into buf, which
// CleanPath returns, grown, for reuse; p's slices point into it or into
// target. A target that is already clean is p.Resolved as it is: no copy,
// no allocation.
func CleanPath(p *Path, target, buf []byte) ([]byte, error) {
	*p = Path{}
	if bytes.IndexByte(target, '#') >= 0 {
		return buf, ErrBadPath
	}
	if i := bytes.IndexByte(target, '?'); i >= 0 {
		target = target[:i]
	}
	if len(target) == 0 {
		return buf, ErrBadPath
	}
	if target[0] != '/' {
		if len(target) == 1 && target[0] == '*' {
			p.Resolved = target
			return buf, nil
		}
		rest, ok := cutAbsolute(target)
		if !ok {
			return buf, ErrBadPath
		}
		if target = rest; len(target) == 0 {
			target = slash
		}
	}
	decode, dots := scanPath(target)
	if !decode && !dots {
		p.Resolved = target
		return buf, nil
	}
	written := target
	if decode {
		// Decoded and collapsed, dots kept: the Written form, from which
		// the Resolved one is made.
		start := len(buf)
		var err error
		if buf, err = decodePath(buf, target); err != nil {
			return buf[:start], err
		}
		written = cleanSegments(buf[start:], false)
		buf = buf[:start+len(written)]
		if _, dots = scanPath(written); !dots {
			p.Resolved = written
			return buf, nil
		}
	}
	start := len(buf)
	buf = append(buf, written...)
	p.Resolved = cleanSegments(buf[start:], true)
	buf = buf[:start+len(p.Resolved)]
	p.Written = written
	return buf, nil
}

var slash = []byte("/")

// cutAbsolute returns the path of an absolute URI (scheme "://" authority
// path), or false when target is not one.
func cutAbsolute(target []byte) ([]byte, bool) {
	i := bytes.Index(target, []byte("://"))
	if i <= 0 {
		return nil, false
	}
	for j, c := range target[:i] {
		letter := 'a' <= c|0x20 && c|0x20 <= 'z'
		if !letter && (j == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return nil, false
		}
	}
	rest := target[i+3:]
	if j := bytes.IndexByte(rest, '/'); j >= 0 {
		return rest[j:], true
	}
	return nil, true
}

// scanPath reports whether path (which starts with a slash) holds anything
// that decodePath and cleanSegments would change but dot segments (decode),
// and whether it holds a "." or ".." segment (dots). It runs on every
// /auth request: one pass, a table lookup a byte.
func scanPath(path []byte) (decode, dots bool) {
	for i, c := range path {
		switch pathClass[c] {
		case 0:
		case classDecode:
			decode = true
		case classSlash:
			if i+1 < len(path) && path[i+1] == '/' {
				decode = true
			} else if !dots && dotSegment(path[i+1:]) {
				dots = true
			}
		}
	}
	return decode, dots
}

// Byte classes of scanPath.
const (
	classDecode = 1 + iota
	classSlash
)

var pathClass = [256]uint8{'%': classDecode, '\\': classDecode, ';': classDecode, '/': classSlash}

// dotSegment reports whether rest (what follows a slash) starts with a
// "." or ".." segment.
func dotSegment(rest []byte) bool {
	n := 0
	for n < len(rest) && n < 2 && rest[n] == '.' {
		n++
	}
	return n > 0 && (n == len(rest) || rest[n] == '/')
}

// decodePath appends path to dst with every percent escape decoded and
// backslashes made slashes.
func decodePath(dst, path []byte) ([]byte, error) {
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch c {
		case '%':
			if i+2 >= len(path) {
				return dst, ErrBadPath
			}
			hi, ok1 := unhex(path[i+1])
			lo, ok2 := unhex(path[i+2])
			if !ok1 || !ok2 {
				return dst, ErrBadPath
			}
			c = hi<<4 | lo
			i += 2
			if c == '\\' {
				c = '/'
			}
		case '\\':
			c = '/'
		}
		dst = append(dst, c)
	}
	return dst, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c|0x20 && c|0x20 <= 'f':
		return c | 0x20 - 'a' + 10, true
	}
	return 0, false
}

// cleanSegments rewrites b (a decoded path that starts with a slash) in
// place and returns it: empty segments dropped, each segment cut at its
// first ";", and, with resolve, "." and ".." segments resolved. A trailing
// slash stays.
func cleanSegments(b []byte, resolve bool) []byte {
	n := len(b)
	trailing := n > 1 && b[n-1] == '/'
	w := 1 // b[:w] is the output so far, b[0] == '/'
	for r := 1; r < n; {
		end := r
		for end < n && b[end] != '/' {
			end++
		}
		seg := b[r:end]
		if i := bytes.IndexByte(seg, ';'); i >= 0 {
			seg = seg[:i]
		}
		r = end + 1
		switch {
		case len(seg) == 0:
			continue
		case resolve && len(seg) == 1 && seg[0] == '.':
			if r >= n {
				trailing = true // "/a/." is "/a/"
			}
			continue
		case resolve && len(seg) == 2 && seg[0] == '.' && seg[1] == '.':
			for w > 1 && b[w-1] != '/' {
				w--
			}
			if w > 1 {
				w--
			}
			if r >= n {
				trailing = true // "/a/b/.." is "/a/"
			}
			continue
		}
		if w > 1 {
			b[w] = '/'
			w++
		}
		w += copy(b[w:], seg)
	}
	if trailing && w > 1 {
		b[w] = '/'
		w++
	}
	return b[:w]
}

// checkPrefix says why a path_prefix can never begin a path as CleanPath
// reads it (such as "/api//", "/api/%41" or "/a/../b"), or "" when it
// can.
func checkPrefix(prefix string) string {
	var p Path
	if _, err := CleanPath(&p, []byte(prefix), nil); err != nil {
		return "is not a path: matching compares it with decoded, clean paths"
	}
	if p.Written != nil || string(p.Resolved) != prefix {
		return "would never match: matching compares it with decoded, clean paths, where it is " + strconv.Quote(string(p.Resolved))
	}
	return ""
}
