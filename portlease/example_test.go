package portlease_test

import (
	"fmt"
	"log"

	"github.com/conchsh/conch/portlease"
)

// A lease held by one process is never handed to another on the same
// machine; the daemon and localsandbox lease ports this way.
func ExampleAcquire() {
	lease, err := portlease.Acquire()
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release()
	fmt.Println(lease.Port() > 0)
	// Output: true
}
