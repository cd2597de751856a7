module github.com/raterlimiter/raterlimiter

go 1.26.8

require github.com/tidwall/btree v1.8.2

require (
	github.com/stretchr/testify v1.12.1
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
