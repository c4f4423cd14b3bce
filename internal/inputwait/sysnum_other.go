//go:build !amd64 && !arm64

package inputwait

// unknownArch makes Waiting fail with ErrUnsupported: this architecture's
// system call numbers are not checked here.
const unknownArch = true

var legacyCalls = map[int]call{}
