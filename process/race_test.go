//go:build race

package process

// raceEnabled reports whether the race detector is on: its instrumentation
// moves values to the heap that escape analysis keeps on the stack.
const raceEnabled = true
