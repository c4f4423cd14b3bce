// Package rawpath joins and splits paths as text, not cleaned, so that the
// kernel resolves them as it would a path a program opens. filepath.Join and
// filepath.Dir clean, which names another file: a ".." after a symbolic link
// goes back to where the link is, not up from where it leads; a "." or ".."
// after a missing name or a file, which the kernel fails (ENOENT,
// ENOTDIR), goes; and a final "/" or "/." that only a directory takes goes
// too.
package rawpath

import "strings"

// Under returns p, a relative path, named from dir, as execvp joins a PATH
// entry and a name: dir, a "/" unless dir ends in one, and p.
func Under(dir, p string) string {
	if strings.HasSuffix(dir, "/") {
		return dir + p
	}
	return dir + "/" + p
}

// Split splits p after its last "/": dir is p up to that "/", without it
// unless it is the first, and name what follows it. A p without "/" has
// dir ".". Neither is cleaned.
func Split(p string) (dir, name string) {
	i := strings.LastIndexByte(p, '/')
	switch i {
	case -1:
		return ".", p
	case 0:
		return "/", p[1:]
	}
	return p[:i], p[i+1:]
}

// NamesDir reports whether p names a directory by its text alone, whatever
// is there: it is empty, or ends in "/", or its last element is "." or
// "..". Only a directory is opened by such a path.
func NamesDir(p string) bool {
	_, name := Split(p)
	return name == "" || name == "." || name == ".."
}
