package process

import (
	"path/filepath"
	"slices"
	"strings"
)

// RunDir is the directory a program started in cwd, an absolute path to a
// directory, runs in: cwd cleaned, or, where a ".." in it may follow a
// symbolic link, its real path. filepath.Clean drops "link/.." by name, but
// the kernel goes up from where the link leads.
func RunDir(cwd string) (string, error) {
	if !slices.Contains(strings.Split(cwd, "/"), "..") {
		return filepath.Clean(cwd), nil
	}
	return filepath.EvalSymlinks(cwd)
}
