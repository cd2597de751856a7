module github.com/raterlimiter/raterlimiter

go 1.26.8

require github.com/tidwall/btree v1.8.2
