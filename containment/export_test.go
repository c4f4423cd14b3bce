package containment

// WithoutKillFile makes m end its processes by freezing the cgroup, as on
// kernels without cgroup.kill.
func WithoutKillFile(m Manager) {
	switch m := m.(type) {
	case *cgroup:
		m.killFile = false
	case *hybrid:
		m.killFile = false
	}
}
