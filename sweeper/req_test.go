package sweeper_test

import (
	"github.com/raterlimiter/raterlimiter/internal/millis"
)

func req(scale int64) millis.Request { return millis.Request{ID: "u", Scale: scale, Limit: 5, Hits: 1} }
