module github.com/offmap/offmap/metrics

// github.com/offmap/offmap is required at its release, as `go install` and
// `go get` see it. Inside a clone, go.work in this directory makes every
// go command run here build against the root module of the working tree
// (..) instead. `go mod tidy` ignores go.work, so it can only run here
// once the required release is on the module proxy (docs/RELEASING.md).

go 1.26.0

require (
	github.com/offmap/offmap v0.1.0
	github.com/prometheus/client_golang v1.25.0
	github.com/prometheus/client_model v0.6.3
	github.com/prometheus/common v0.74.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pandatix/go-abnf v0.5.5 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

