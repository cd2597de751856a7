package algo

import rl "github.com/raterlimiter/raterlimiter"

// Sliding is the two-window weighted estimate.
// TODO(algorithms issue): the real algorithm; until then it decides as Fixed.
func Sliding(cur Record, ok bool, prev Record, prevOK bool, now int64, r rl.Request) (rl.Decision, Record, bool) {
	return Fixed(cur, ok, now, r)
}
