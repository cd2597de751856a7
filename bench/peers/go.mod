module github.com/raterlimiter/raterlimiter/bench/peers

go 1.26.8

require (
	github.com/raterlimiter/raterlimiter v0.0.0
	github.com/sethvargo/go-limiter v0.7.1
	golang.org/x/time v0.16.0
)

require github.com/tidwall/btree v1.8.2 // indirect

replace github.com/raterlimiter/raterlimiter => ../..
