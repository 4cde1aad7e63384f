module github.com/offmap/offmap

go 1.26.0

require golang.org/x/sys v0.50.0

require github.com/cespare/xxhash/v2 v2.3.0 // indirect
