package containment

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Open chooses the daemon's Root from what the host mounts and makes the
// daemon's cgroup, conch-<Instance>, in the v2 hierarchy and in each v1
// hierarchy of a controller v2 does not delegate. It never fails: without
// a writable v2 hierarchy the Root is in ModeNone, and Reason says why.
func Open(cfg Config) *Root {
	r := &Root{mode: ModeNone, defaults: cfg.Defaults}
	if cfg.Disabled {
		r.reason = "containment none was asked for"
		return r
	}
	mounts := readMounts()
	own := ownCgroups()
	parent := cfg.Path
	if parent == "" {
		if mounts.v2 == "" {
			r.reason = "no cgroup v2 hierarchy is mounted"
			return r
		}
		parent = filepath.Join(mounts.v2, filepath.Dir(own[""]))
		if unix.Access(parent, unix.W_OK) != nil {
			parent = mounts.v2
		}
	}
	if _, err := os.Stat(filepath.Join(parent, "cgroup.procs")); err != nil {
		r.reason = fmt.Sprintf("%s is not a cgroup v2 directory", parent)
		return r
	}
	dir := filepath.Join(parent, "conch-"+cfg.Instance)
	if err := os.Mkdir(dir, 0o755); err != nil {
		r.reason = fmt.Sprintf("cannot make a cgroup under %s: %v", parent, err)
		return r
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.events")); err != nil {
		_ = unix.Rmdir(dir)
		r.reason = fmt.Sprintf("%s is not a cgroup v2 directory", parent)
		return r
	}
	r.mode, r.dir, r.spares = ModeCgroup2, dir, &spares{}
	_, err := os.Stat(filepath.Join(dir, "cgroup.kill"))
	r.killFile = err == nil
	r.v2 = enable(parent, dir)
	r.v1 = map[string]v1dir{}
	for _, c := range controllers {
		mp, home := mounts.v1[c], own[c]
		if r.v2[c] || mp == "" || home == "" {
			continue
		}
		d := v1dir{dir: filepath.Join(mp, home, "conch-"+cfg.Instance), home: filepath.Join(mp, home)}
		if err := os.Mkdir(d.dir, 0o755); err == nil || os.IsExist(err) {
			r.v1[c] = d
		}
	}
	return r
}

// enable turns on the limits' controllers for the cgroups below dir, and
// for dir in its parent where they are not on there yet, and returns those
// it could turn on.
func enable(parent, dir string) map[string]bool {
	on := map[string]bool{}
	have := fields(filepath.Join(dir, "cgroup.controllers"))
	for _, c := range controllers {
		if !have[c] && fields(filepath.Join(parent, "cgroup.controllers"))[c] {
			if write(filepath.Join(parent, "cgroup.subtree_control"), "+"+c) == nil {
				have[c] = true
			}
		}
		if have[c] && write(filepath.Join(dir, "cgroup.subtree_control"), "+"+c) == nil {
			on[c] = true
		}
	}
	return on
}

// fields reads a file of space-separated words as a set.
func fields(path string) map[string]bool {
	b, _ := os.ReadFile(path)
	out := map[string]bool{}
	for _, f := range strings.Fields(string(b)) {
		out[f] = true
	}
	return out
}

// mounts are the cgroup hierarchies this process sees.
type mounts struct {
	v2 string            // the cgroup2 mount point
	v1 map[string]string // controller → mount point of its v1 hierarchy
}

// readMounts reads /proc/self/mountinfo.
func readMounts() mounts {
	m := mounts{v1: map[string]string{}}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return m
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 || a[3] != "/" {
			continue
		}
		switch b[0] {
		case "cgroup2":
			if m.v2 == "" {
				m.v2 = a[4]
			}
		case "cgroup":
			for _, o := range strings.Split(b[2], ",") {
				for _, c := range controllers {
					if o == c && m.v1[c] == "" {
						m.v1[c] = a[4]
					}
				}
			}
		}
	}
	return m
}

// ownCgroups reads /proc/self/cgroup: this process's cgroup in each
// hierarchy, the v2 one under "" and each v1 one under its controllers.
func ownCgroups() map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out
}

// Destroy ends every process in the daemon's cgroups and removes them.
func (r *Root) Destroy() error {
	if r.Mode() == ModeNone {
		return nil
	}
	ferr := r.stopForker()
	_, err := Clear(strings.TrimPrefix(filepath.Base(r.dir), "conch-"), r.Dirs())
	return errors.Join(ferr, err)
}

// stopForker ends the root's forker, if it started one; none starts after.
func (r *Root) stopForker() error {
	sp := r.spares
	if sp == nil {
		return nil
	}
	sp.once.Do(func() {})
	if sp.f == nil {
		return nil
	}
	return sp.f.stop()
}

// Clear ends every process in the cgroups of instance, dirs as
// [Root.Dirs] gave them (the v2 one first), and removes them with the
// cgroups below them: what a daemon that died left, a process that left
// the v2 cgroup but not a v1 one included. Directories not named
// for instance are left alone. It returns how many processes it ended.
func Clear(instance string, dirs []string) (int, error) {
	var err error
	n := 0
	for i, d := range dirs {
		if filepath.Base(d) != "conch-"+instance || !filepath.IsAbs(d) {
			err = errors.Join(err, fmt.Errorf("%s is not a cgroup of instance %s", d, instance))
			continue
		}
		if i > 0 {
			// What is left in a v1 cgroup left the v2 one (root can
			// move itself): ended here, or the directory stays busy.
			n += killMembers(d)
			err = errors.Join(err, removeTree(d))
			continue
		}
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, werr error) error {
			if werr == nil && e.IsDir() {
				b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
				n += len(strings.Fields(string(b)))
			}
			return nil
		})
		_, kerr := os.Stat(filepath.Join(d, "cgroup.kill"))
		if derr := (&cgroup{dir: d, killFile: kerr == nil}).Destroy(); derr != nil {
			return n, derr // the v1 cgroups still hold what is alive
		}
	}
	return n, err
}
