//go:build race

package offmap

const raceEnabled = true
