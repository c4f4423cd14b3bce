package server

import (
	"github.com/conchsh/conch/exec"
)

// StartExec starts a process through the engine as the API's own are
// started, for another surface of the same daemon (conch sandboxd's
// ProcessService): it counts against MaxProcesses, is listed and its logs
// are served by this API, and Shutdown ends it. A nil opts.Containment
// means the server's, whose default limits then apply, as they do to the
// API's processes. A zero opts.Retention means the server's LogRetention. Errors are exec.Start's, process.ErrLimit, and
// the refusal of a server that shuts down (wrapping process.ErrUnsupported).
func (s *Server) StartExec(opts exec.Options) (*exec.Process, error) {
	c := claim{slotProcess, textCost(opts.Cmd, opts.Argv)}
	if err := s.checkCommandSize(textBytes(opts.Cmd, opts.Argv)); err != nil {
		return nil, err
	}
	if err := s.reserve(c); err != nil {
		return nil, err
	}
	if opts.Containment == nil {
		opts.Containment = s.opts.Containment
	}
	if opts.Retention == 0 {
		opts.Retention = s.opts.LogRetention
	}
	p, err := exec.Start(opts)
	if err != nil {
		s.release(c)
		return nil, err
	}
	if err := s.track(p, c); err != nil {
		return nil, err
	}
	return p, nil
}
