package raterlimiter

import (
	"context"
	"fmt"
)

// ErrDeadlineTooClose is returned by a Limiter's Wait method when the
// context's deadline is less than a millisecond away: nothing is counted.
// It matches context.DeadlineExceeded.
var ErrDeadlineTooClose = fmt.Errorf("raterlimiter: Wait: the context's deadline is less than 1 ms away; nothing counted: %w", context.DeadlineExceeded)
