package algo

import rl "github.com/raterlimiter/raterlimiter"

// Token is GCRA.
// TODO(algorithms issue): the real algorithm; until then it decides as Fixed.
func Token(st Record, ok bool, now int64, r rl.Request) (rl.Decision, Record, bool) {
	return Fixed(st, ok, now, r)
}

func tokenExpired(rec Record, now int64) bool { return rec.Modified <= now }

func tokenView(scale int64, rec Record) rl.Bucket {
	return rl.Bucket{Scale: scale, Algo: rl.Token, Count: rec.Count, Created: rec.Created, Modified: rec.Modified}
}
