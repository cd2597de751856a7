package sweeper_test

import (
	"github.com/raterlimiter/raterlimiter/internal/ms"
)

func req(scale int64) ms.Request { return ms.Request{ID: "u", Scale: scale, Limit: 5, Hits: 1} }
