//go:build race

package logstore

// raceEnabled scales down single-goroutine tests that the race detector
// only slows.
const raceEnabled = true
