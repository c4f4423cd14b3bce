package sandboxd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	osexec "os/exec"
	"strconv"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/conchsh/conch/exec"
	"github.com/conchsh/conch/internal/plaintext"
	"github.com/conchsh/conch/logstore"
	"github.com/conchsh/conch/process"
	"github.com/conchsh/conch/sandboxd/sandboxdpb"
)

// The gRPC ProcessService over package exec.

// spawn starts the process cfg describes: on a terminal of pty's size when
// pty is set, else with its stdin on a pipe when openStdin is set (else
// /dev/null). A program that cannot be run is an error here, as it is
// upstream, not a process that exits.
func (s *Server) spawn(cfg *sandboxdpb.ProcessConfig, pty *sandboxdpb.PTY, openStdin bool) (*exec.Process, error) {
	argv := cfg.GetCommand()
	if len(argv) == 0 || argv[0] == "" {
		return nil, status.Error(codes.InvalidArgument, "command is required")
	}
	// No cwd is the root, checked as a cwd of "/" is: a root that a
	// process in the sandbox removed is NOT_FOUND either way, not the
	// engine's INVALID_ARGUMENT.
	c := cmp.Or(cfg.GetCwd(), "/")
	cwd, err := s.resolve(c)
	if err != nil {
		return nil, pathStatus("cwd", c, err)
	}
	fi, err := os.Stat(cwd)
	if err != nil {
		return nil, pathStatus("cwd", c, err)
	}
	if !fi.IsDir() {
		return nil, status.Errorf(codes.InvalidArgument, "cwd %q is not a directory", c)
	}
	opts := exec.Options{
		Argv:      argv,
		Name:      "sandboxd",
		Cwd:       cwd,
		Env:       cfg.GetEnvVars(),
		StopGrace: s.opts.StopGrace,
		KeepLogs:  logstore.KeepOnExitTTL,
		Retention: s.opts.LogRetention,
	}
	switch {
	case pty != nil:
		opts.Kind = process.KindPTY
		// A side over the bound is refused even when the other is 0 and
		// the default size would be taken.
		size, err := terminalSize(pty.GetCols(), pty.GetRows())
		if err != nil {
			return nil, err
		}
		if size.Cols > 0 && size.Rows > 0 {
			opts.Terminal = &size // set before the child starts: it never sees 0×0
		}
	case openStdin:
		opts.Stdin = process.StdinOpen
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return nil, status.Error(codes.Unavailable, "sandboxd is shutting down")
	}
	p, err := s.start(opts)
	if err != nil {
		return nil, startStatus(err)
	}
	if i := p.Info(); i.State == process.Terminal && i.Result.Reason == process.Failed {
		return nil, failedStatus(p.Failure())
	}
	s.mu.Lock()
	closing = s.closing
	if !closing {
		s.live[p] = struct{}{}
	}
	s.mu.Unlock()
	if closing { // Shutdown listed the processes already
		_ = p.Stop(context.Background())
		return nil, status.Error(codes.Unavailable, "sandboxd is shutting down")
	}
	return p, nil
}

// beginWork counts a Start or Execute call with Options.Work until end is
// called.
func (s *Server) beginWork() (end func(), err error) {
	if s.opts.Work == nil {
		return func() {}, nil
	}
	end, err = s.opts.Work()
	if err != nil {
		return nil, startStatus(err)
	}
	return end, nil
}

// settled forgets p, which has ended and been answered for.
func (s *Server) settled(p *exec.Process) {
	s.mu.Lock()
	delete(s.live, p)
	s.mu.Unlock()
}

func terminalSize(cols, rows uint32) (process.TerminalSize, error) {
	if cols > math.MaxUint16 || rows > math.MaxUint16 {
		return process.TerminalSize{}, status.Errorf(codes.InvalidArgument, "terminal size %dx%d is too large", cols, rows)
	}
	return process.TerminalSize{Cols: uint16(cols), Rows: uint16(rows)}, nil
}

// pathStatus is the status of a path the client named what (as "cwd")
// that cannot be used: as REST answers the same path (see classifyPath).
func pathStatus(what, p string, err error) error {
	f := classifyPath(p, err)
	return status.Errorf(f.grpc, "%s: %s", what, f.msg)
}

// startStatus is the status of an error of the engine's start: out of
// open files or processes is RESOURCE_EXHAUSTED, as conch's API answers it
// 429, not INTERNAL: nothing failed in the daemon, and a retry once other
// work has ended may work.
func startStatus(err error) error {
	switch {
	case errors.Is(err, process.ErrInvalidArgument):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, process.ErrLimit):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, process.ErrUnsupported), errors.Is(err, ErrUnavailable):
		return status.Error(codes.Unavailable, err.Error())
	}
	if msg, ok := process.Exhausted(err); ok {
		return status.Error(codes.ResourceExhausted, msg)
	}
	return status.Errorf(codes.Internal, "start: %v", err)
}

// failedStatus is the status of a program that could not be executed,
// from the engine's error: NOT_FOUND for a missing one, PERMISSION_DENIED
// for one that may not be executed (execve's EACCES: a directory, a file
// without an execute bit), FAILED_PRECONDITION for a file of no format
// the kernel runs (ENOEXEC: a script without #!, a binary of another
// machine), which upstream answers INTERNAL though nothing failed in the
// daemon, and INVALID_ARGUMENT for a program path the REST API would
// answer 400 as a file's (under a file, through a loop of symlinks, too
// long) and for arguments and an environment over what execve takes
// (E2BIG): the request chose them, as conch's API answers them 400.
func failedStatus(err error) error {
	switch {
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.ENAMETOOLONG):
		return status.Errorf(codes.InvalidArgument, "command cannot be run: %v", err)
	case errors.Is(err, syscall.E2BIG):
		return status.Errorf(codes.InvalidArgument,
			"command cannot be run: %v: the arguments and environment are over what the kernel takes for a program (one string at most 128 KiB, all together at most a quarter of the stack limit)", err)
	case errors.Is(err, osexec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return status.Errorf(codes.NotFound, "command not found: %v", err)
	case errors.Is(err, fs.ErrPermission):
		return status.Errorf(codes.PermissionDenied, "command cannot be run: %v", err)
	case errors.Is(err, syscall.ENOEXEC):
		return status.Errorf(codes.FailedPrecondition, "command cannot be run: %v: not a program the kernel runs (a script needs a #! line)", err)
	}
	return status.Errorf(codes.Internal, "command cannot be run: %v", err)
}

// exitCode is the exit code upstream reports for res: the process's exit
// status, or -1 when a signal ended it (not the shell's 128+n). A process
// that handled a signal and exited on its own reports its status.
func exitCode(res *process.Result) int32 {
	if res == nil || res.ExitCode == nil {
		return -1
	}
	code := *res.ExitCode
	if res.Reason == process.Signaled && !res.Handled {
		if sig, err := process.ParseSignal(res.Signal); err == nil && code == 128+int(sig) {
			return -1
		}
	}
	return int32(code)
}

// follow calls send with each stretch of p's output, at most chunk bytes,
// until the output ends, and returns p's exit code. When ctx ends or send
// fails first, p's tree is killed, as the end of a request ends what it
// started upstream, and the error is returned once p has ended.
func follow(ctx context.Context, p *exec.Process, chunk int, send func(logstore.Channel, []byte) error, dropped func(bytes int64)) (int32, error) {
	var sendErr error
	err := p.Log().Follow(ctx, 0, func(ev logstore.Event) bool {
		if ev.Warning != nil {
			dropped(ev.Warning.Bytes) // output the client fell behind on
		}
		if ev.Frame == nil {
			return true
		}
		for b := ev.Frame.Data; len(b) > 0; {
			n := min(len(b), chunk)
			if sendErr = send(ev.Frame.Channel, b[:n]); sendErr != nil {
				return false
			}
			b = b[n:]
		}
		return true
	})
	if err == nil {
		err = sendErr
	}
	if err != nil {
		_ = p.Kill(syscall.SIGKILL, 0, 0)
		<-p.Done()
		return 0, err
	}
	<-p.Done()
	return exitCode(p.Info().Result), nil
}

// droppedTrailer is the trailer of a Start stream that lost output: the
// bytes dropped, or -1 when the log could not tell how many.
const droppedTrailer = "conch-output-dropped-bytes"

// Start runs a command and streams its events: init with the process's id,
// its stdout and stderr (a terminal's output is stdout) as they come, then
// exit. The process lives as long as the stream: when the client goes away
// its tree is killed.
func (s *Server) Start(req *sandboxdpb.StartRequest, stream sandboxdpb.ProcessService_StartServer) (err error) {
	defer boundMessage(&err)
	end, err := s.beginWork()
	if err != nil {
		return err
	}
	defer end() // after the exit event: the stream is in flight until then
	p, err := s.spawn(req.GetConfig(), req.GetPty(), true)
	if err != nil {
		return err
	}
	defer s.settled(p)
	id := s.register(p)
	defer s.unregister(id)
	events := startSender(stream, s.opts.IOIdle)
	defer events.stop()
	// Registered before init is sent: a WriteStdin or SendSignal right
	// after init finds the process.
	if err := events.send(&sandboxdpb.StartResponse{Event: &sandboxdpb.StartResponse_Init{Init: &sandboxdpb.InitEvent{ProcessId: id}}}); err != nil {
		_ = p.Kill(syscall.SIGKILL, 0, 0)
		<-p.Done()
		return err
	}
	// Output the client fell more than the log's retention behind on is
	// dropped, not waited for (docs/sandboxd.md); the stream's events
	// cannot say so, so its trailer does: how many bytes were dropped (-1
	// when the log could not tell).
	var lost int64
	code, err := follow(stream.Context(), p, s.opts.StreamChunkSize, func(ch logstore.Channel, b []byte) error {
		ev := &sandboxdpb.StartResponse{Event: &sandboxdpb.StartResponse_Stdout{Stdout: b}}
		if ch == logstore.Stderr {
			ev = &sandboxdpb.StartResponse{Event: &sandboxdpb.StartResponse_Stderr{Stderr: b}}
		}
		return events.send(ev)
	}, func(n int64) {
		if n < 0 || lost < 0 {
			lost = -1
		} else {
			lost += n
		}
	})
	if lost != 0 {
		stream.SetTrailer(metadata.Pairs(droppedTrailer, strconv.FormatInt(lost, 10)))
	}
	if err != nil {
		return callEnded(err)
	}
	return events.send(&sandboxdpb.StartResponse{Event: &sandboxdpb.StartResponse_Exit{Exit: &sandboxdpb.ExitEvent{ExitCode: code}}})
}

// sender sends a Start stream's events from a goroutine of its own, so
// that a stream whose client reads none of them can be let go: a Send
// waits while the stream's flow-control window is full, as long as the
// client keeps the connection, and returns only once the stream has
// ended, which Start's return does. A send that waited idle is an error,
// as a REST download's write that waited IOIdle closes its connection.
type sender struct {
	idle   time.Duration
	events chan *sandboxdpb.StartResponse // to send; closed by stop
	sent   chan error                     // each send's result
}

// startSender starts the goroutine that sends to stream. It ends once stop
// has been called and its last Send has returned: at once, or, for a Send
// that waits on a client that reads nothing, once Start has returned and
// the stream has ended.
func startSender(stream sandboxdpb.ProcessService_StartServer, idle time.Duration) *sender {
	q := &sender{idle: idle, events: make(chan *sandboxdpb.StartResponse), sent: make(chan error, 1)}
	go func() {
		for ev := range q.events {
			q.sent <- stream.Send(ev)
		}
	}()
	return q
}

// send sends ev, and returns Send's error, or a DEADLINE_EXCEEDED status
// when the Send waited idle; the stream is then not sent to again.
func (q *sender) send(ev *sandboxdpb.StartResponse) error {
	q.events <- ev // the goroutine waits for it: the last send's result was taken
	t := time.NewTimer(q.idle)
	defer t.Stop()
	select {
	case err := <-q.sent:
		return err
	case <-t.C:
		return status.Errorf(codes.DeadlineExceeded,
			"the client read none of the stream for %v while it had events to send: the stream was ended, its process killed if it still ran", q.idle)
	}
}

// stop ends the goroutine once its last Send has returned.
func (q *sender) stop() { close(q.events) }

// Execute runs a command to its end, with stdin on /dev/null, and answers
// its whole stdout, stderr and exit code, from its log once it ended. An
// output the log could not keep whole (over --log-retention, or dropped by
// --log-budget) is RESOURCE_EXHAUSTED, saying so and how the process
// ended: an answer that left bytes out would look whole. Start streams
// output of any size.
func (s *Server) Execute(ctx context.Context, req *sandboxdpb.ExecuteRequest) (_ *sandboxdpb.ExecuteResponse, err error) {
	defer boundMessage(&err)
	end, err := s.beginWork()
	if err != nil {
		return nil, err
	}
	defer end()
	p, err := s.spawn(req.GetConfig(), nil, false)
	if err != nil {
		return nil, err
	}
	defer s.settled(p)
	select {
	case <-p.Done():
	case <-ctx.Done():
		_ = p.Kill(syscall.SIGKILL, 0, 0)
		<-p.Done()
		return nil, callEnded(ctx.Err())
	}
	code := exitCode(p.Info().Result)
	page := p.Log().Page(0, 0)
	if page.TruncatedHead {
		return nil, status.Errorf(codes.ResourceExhausted,
			"the output was more than a process's log keeps (%d bytes, --log-retention; or the daemon's logs together, --log-budget), "+
				"and its start was dropped; the process ended with exit code %d; Start streams output of any size",
			p.Log().Retention(), code)
	}
	var out, errb []byte
	for _, f := range page.Frames {
		if f.Channel == logstore.Stderr {
			errb = append(errb, f.Data...)
		} else {
			out = append(out, f.Data...)
		}
	}
	return &sandboxdpb.ExecuteResponse{ExitCode: code, Stdout: out, Stderr: errb}, nil
}

// maxMessage bounds a status's message, in bytes. A message quotes what
// the request named (a cwd, a program, a variable's name), which may be
// megabytes; it travels in the trailers, which gRPC's C-core and Java
// clients (Python's grpcio among them) take up to 8 KiB of, or the
// stream is reset and the client sees INTERNAL instead of the status. The
// message is percent-encoded there, up to 3 bytes a byte.
const maxMessage = 1024

// boundMessage cuts the message of the status *err to maxMessage bytes,
// leaving out its middle: its start says what was refused and its end
// why.
func boundMessage(err *error) {
	st, ok := status.FromError(*err)
	if !ok || len(st.Message()) <= maxMessage {
		return
	}
	p := st.Proto()
	p.Message = cutMiddle(p.Message, maxMessage)
	*err = status.ErrorProto(p)
}

// cutNote replaces the middle cutMiddle leaves out.
const cutNote = "...(%d bytes left out)..."

// cutMiddle returns m cut to at most n bytes, its middle replaced by
// cutNote, cut between UTF-8 characters.
func cutMiddle(m string, n int) string {
	keep := n - len(fmt.Sprintf(cutNote, len(m))) // the note's longest
	head, tail := plaintext.CutEnd(m, keep*3/4), plaintext.CutStart(m, keep-keep*3/4)
	return head + fmt.Sprintf(cutNote, len(m)-len(head)-len(tail)) + tail
}

// callEnded is the status of a call whose context ended, or whose stream
// failed, before its process did.
func callEnded(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return err
}

// startedProcess is a process of a Start stream, as WriteStdin, SendSignal and
// ResizeTTY find it by its id.
type startedProcess struct {
	p *exec.Process
	// stdin is the turn of WriteStdin calls: one call's input goes whole,
	// not mixed with another's, as a write to upstream's pipe does (the
	// engine queues a piece at a time while the process reads).
	stdin chan struct{}
}

func (s *Server) register(p *exec.Process) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		s.nextID++
		if s.nextID <= 0 {
			s.nextID = 1 // wrapped: ids stay positive
		}
		if _, taken := s.byID[s.nextID]; !taken {
			s.byID[s.nextID] = &startedProcess{p: p, stdin: make(chan struct{}, 1)}
			return s.nextID
		}
	}
}

func (s *Server) unregister(id int32) {
	s.mu.Lock()
	delete(s.byID, id)
	s.mu.Unlock()
}

// lookup returns the process of a Start stream by its id.
func (s *Server) lookup(id int32) (*startedProcess, error) {
	s.mu.Lock()
	st := s.byID[id]
	s.mu.Unlock()
	if st == nil {
		return nil, status.Errorf(codes.NotFound, "process %d not found", id)
	}
	return st, nil
}

// WriteStdin writes bytes to a process's stdin (its terminal, for a PTY), or
// ends it: the pipe is closed, or a terminal gets its end-of-file character.
func (s *Server) WriteStdin(ctx context.Context, req *sandboxdpb.WriteStdinRequest) (_ *sandboxdpb.WriteStdinResponse, err error) {
	defer boundMessage(&err)
	st, err := s.lookup(req.GetProcessId())
	if err != nil {
		return nil, err
	}
	p := st.p
	// One call at a time, the end of stdin too: it comes after the input
	// of a call before it, whole.
	select {
	case st.stdin <- struct{}{}:
		defer func() { <-st.stdin }()
	case <-ctx.Done():
		return nil, status.Errorf(status.FromContextError(ctx.Err()).Code(),
			"process %d: the call ended waiting for another WriteStdin of the process to be written; none of its input was written", req.GetProcessId())
	}
	written := 0
	if req.GetEof() != nil {
		err = p.CloseStdin()
	} else if b := req.GetInput(); len(b) > 0 {
		written, err = writeAll(ctx, p, b, s.writeStdin)
	}
	var full *process.StdinFullError
	switch {
	case errors.Is(err, ErrStdinBudget) && errors.As(err, &full):
		// Refused, not waited for, as conch's API refuses it 409
		// stdin_full: the budget is the daemon's, and the processes it
		// waits on may be any.
		return nil, status.Errorf(codes.ResourceExhausted,
			"process %d: the stdin of all processes together is at its budget (%d bytes queued, at most %d, --stdin-budget): the call wrote %d of its %d bytes of input, the rest was not; write the rest once the processes have read",
			req.GetProcessId(), full.Queued, full.Limit, written, len(req.GetInput()))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// What was queued stays queued for the process to read.
		return nil, status.Errorf(status.FromContextError(ctx.Err()).Code(),
			"process %d: the call ended with %d of its %d bytes of input written; the rest was not", req.GetProcessId(), written, len(req.GetInput()))
	case errors.Is(err, process.ErrStdinNotOpen):
		return nil, status.Errorf(codes.FailedPrecondition, "process %d: %v", req.GetProcessId(), err)
	case err != nil:
		return nil, status.Errorf(codes.Internal, "process %d: stdin: %v", req.GetProcessId(), err)
	}
	return &sandboxdpb.WriteStdinResponse{}, nil
}

// stdinRetry is how often writeAll looks again for room in a full stdin
// queue.
const stdinRetry = 10 * time.Millisecond

// writeStdin queues b for p's stdin with Options.WriteStdin, or
// p.WriteStdin when it is not set.
func (s *Server) writeStdin(p *exec.Process, b []byte) error {
	if s.opts.WriteStdin != nil {
		return s.opts.WriteStdin(p, b)
	}
	return p.WriteStdin(b)
}

// writeAll writes b to p's stdin with write whole, waiting while the queue
// (process.StdinQueueLimit) is full for the process to read, until ctx
// ends: as upstream's write to the pipe blocks. A write over the queue's
// room was refused with part of it queued, which a client cannot retry.
// A write over the daemon's stdin budget (ErrStdinBudget) is not waited
// for: its error is returned. It returns how many bytes of b were written
// (queued).
func writeAll(ctx context.Context, p *exec.Process, b []byte, write func(*exec.Process, []byte) error) (written int, err error) {
	for {
		err := write(p, b[written:])
		var full *process.StdinFullError
		if !errors.As(err, &full) {
			if err == nil {
				written = len(b)
			}
			return written, err
		}
		written += full.Accepted
		if errors.Is(err, ErrStdinBudget) {
			return written, err
		}
		select {
		case <-ctx.Done():
			return written, ctx.Err()
		case <-time.After(stdinRetry):
		}
	}
}

// signals are the signals SendSignal delivers.
var signals = map[sandboxdpb.Signal]syscall.Signal{
	sandboxdpb.Signal_SIGNAL_SIGINT:  syscall.SIGINT,
	sandboxdpb.Signal_SIGNAL_SIGTERM: syscall.SIGTERM,
	sandboxdpb.Signal_SIGNAL_SIGKILL: syscall.SIGKILL,
}

// SendSignal sends a signal to a process's group and every process of its
// tree (descendants that left the group too).
func (s *Server) SendSignal(ctx context.Context, req *sandboxdpb.SendSignalRequest) (_ *sandboxdpb.SendSignalResponse, err error) {
	defer boundMessage(&err)
	st, err := s.lookup(req.GetProcessId())
	if err != nil {
		return nil, err
	}
	p := st.p
	sig, ok := signals[req.GetSignal()]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "signal %v is not SIGINT, SIGTERM or SIGKILL", req.GetSignal())
	}
	if err := p.Kill(sig, 0, 0); err != nil {
		return nil, status.Errorf(codes.Internal, "process %d: signal: %v", req.GetProcessId(), err)
	}
	return &sandboxdpb.SendSignalResponse{}, nil
}

// ResizeTTY sets a PTY process's terminal size.
func (s *Server) ResizeTTY(ctx context.Context, req *sandboxdpb.ResizeTTYRequest) (_ *sandboxdpb.ResizeTTYResponse, err error) {
	defer boundMessage(&err)
	st, err := s.lookup(req.GetProcessId())
	if err != nil {
		return nil, err
	}
	size, err := terminalSize(req.GetCols(), req.GetRows())
	if err != nil {
		return nil, err
	}
	switch err := st.p.Resize(size); {
	case errors.Is(err, process.ErrInvalidArgument):
		return nil, status.Errorf(codes.InvalidArgument, "process %d: %v", req.GetProcessId(), err)
	case err != nil:
		return nil, status.Errorf(codes.FailedPrecondition, "process %d: resize: %v", req.GetProcessId(), err)
	}
	return &sandboxdpb.ResizeTTYResponse{}, nil
}
