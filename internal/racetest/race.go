//go:build race

// Package racetest tells tests whether the race detector is on: it slows
// them and makes the runtime allocate more, so that some bounds and sizes
// are scaled for it.
package racetest

// Enabled is true when the race detector is on.
const Enabled = true
