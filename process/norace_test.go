//go:build !race

package process

// raceEnabled reports whether the race detector is on (see race_test.go).
const raceEnabled = false
