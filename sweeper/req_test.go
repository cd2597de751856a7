package sweeper_test

import rl "github.com/raterlimiter/raterlimiter"

func req(scale int64) rl.Request { return rl.Request{ID: "u", Scale: scale, Limit: 5, Hits: 1} }
