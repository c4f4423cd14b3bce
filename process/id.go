package process

import (
	"crypto/rand"

	"github.com/google/uuid"
)

// NewID returns a new random (version 4) UUID as a string: the id of a
// process, command, cell or session. It is uuid.NewString in one
// allocation rather than two: the random bytes are read into an array on
// the stack.
func NewID() string {
	var u uuid.UUID
	rand.Read(u[:])         // never fails: crypto/rand.Read crashes the program rather than return an error
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // variant 10 (RFC 9562)
	return u.String()
}
