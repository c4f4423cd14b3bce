package server

import (
	"github.com/conchsh/conch/internal/inputwatch"
	"github.com/conchsh/conch/process"
)

// watchInput starts watching whether p waits for input, when it can: a
// process with open stdin or a terminal, not a session's own shell. Others
// get no watcher and cost nothing.
func (s *Server) watchInput(p process.Process) {
	i := p.Info()
	if i.System || i.Stdin != process.StdinOpen || i.State == process.Terminal {
		return
	}
	if w, ok := p.(inputwatch.Watched); ok {
		s.inputs.Store(p.ID(), inputwatch.Start(w))
	}
}

// input returns p's watcher, nil when it has none (a nil Watcher never
// waits).
func (s *Server) input(id string) *inputwatch.Watcher {
	if w, ok := s.inputs.Load(id); ok {
		return w.(*inputwatch.Watcher)
	}
	return nil
}
