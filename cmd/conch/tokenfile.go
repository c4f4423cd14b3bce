package main

import (
	"fmt"
	"os"
)

// checkTokenFile refuses a token file that others than its owner may read
// or write, as ssh refuses such a private key: anyone who reads the token
// runs commands as the daemon's user. Only regular files are checked; a
// pipe (--token-file <(pass conch)) is the caller's to guard.
func checkTokenFile(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); fi.Mode().IsRegular() && perm&0o077 != 0 {
		return fmt.Errorf("permissions %04o for %s are too open: others than its owner may read the token; chmod 600 it", perm, path)
	}
	return nil
}
