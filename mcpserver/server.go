// Package mcpserver serves conch's sessions and processes to agents over the
// Model Context Protocol. Its tools talk to a conch daemon through a
// *client.Client, so they work the same whether the daemon runs in the
// same process (conch mcp) or elsewhere (conch mcp --url).
package mcpserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/conchsh/conch/client"
)

// DefaultSession is the session a run without a session name goes to.
const DefaultSession = "main"

// Defaults of the tools' waits and answers: an agent's call should come
// back within a turn, with output that fits in its context.
const (
	DefaultTimeout     = 30 * time.Second
	DefaultOutputLimit = 32 << 10
	// MaxOutputLimit bounds what one answer may ask for: each call holds
	// its output several times over as it is read, cut and escaped (a
	// read_output of 30 MB of output took 230 MB), and calls run at once
	// (answerRoom bounds them together).
	MaxOutputLimit = 4 << 20
	// readPageFrames bounds the frames asked for per logs page when
	// reading output from a cursor.
	readPageFrames = 256
)

// Server holds the tools' state: the sessions created by name.
type Server struct {
	c       *client.Client
	version string
	// Shared says that the daemon outlives the server and that other
	// clients may drive it (conch mcp --url): a name the server has no
	// running session of takes the daemon's running session of that name,
	// the newest, and list and close_session reach the daemon's running
	// named sessions, so that a server started again goes on in the
	// sessions of the one before it rather than leave them running out of
	// reach. Set it before Run.
	Shared bool

	mu       sync.Mutex
	sessions map[string]named     // by name
	creating map[string]*creation // by name, the sessions being created
	// stopped is done once Run's context is: the tool calls under way end
	// with it, rather than holding the server's end until they are done.
	stopped context.Context
	// order keeps the runs sent to a session over stdio in the order they
	// were sent.
	order *order
	// budget bounds the output the answers of the calls under way over
	// stdio hold together.
	budget *budget
	// next is the cursor after the last answer given for each command
	// still running, where interact reads on from by default.
	nextMu sync.Mutex
	next   map[string]string
}

// named is a session made by name: its id, and what it runs, so that run
// sends a code context's text as code and tells a mismatch apart.
type named struct {
	id       string
	shell    string // a shell session's shell
	resolved string // its path, when the daemon said it (adopted)
	language string // a code context's language; empty for a shell session
	// opts are what the session was made with (its shell or language,
	// cwd and limits), which the next run makes it again with once it has
	// ended: a name keeps its kind.
	opts client.SessionOptions
	// ended says the session's shell or interpreter has ended: the next
	// run under its name makes a new one with opts.
	ended bool
	// taken says the session is the daemon's, made before (adopted): the
	// daemon tells what opts hold, but not the environment variables it
	// was created with, which a session made again lacks.
	taken bool
	// untold says the session was made again after a taken one ended,
	// without the environment variables that one was created with.
	untold bool
}

// kind is what the session is, in words for a tool's error.
func (n named) kind() string {
	if n.language != "" {
		return "a " + n.language + " code context"
	}
	return "a " + cmp.Or(n.shell, "shell") + " shell session"
}

// described is what the session is, as the daemon said it (its shell's
// path, its limits) when known, in words for a note.
func (n named) described() string {
	d := n.kind()
	if n.language == "" && n.resolved != "" && n.resolved != n.shell {
		d += " (" + n.resolved + ")"
	}
	if l := n.opts.Limits; l != nil {
		var b []string
		if l.MemoryBytes > 0 {
			b = append(b, fmt.Sprintf("memoryBytes %d", l.MemoryBytes))
		}
		if l.Pids > 0 {
			b = append(b, fmt.Sprintf("pids %d", l.Pids))
		}
		if l.CPUMillis > 0 {
			b = append(b, fmt.Sprintf("cpuMillis %d", l.CPUMillis))
		}
		if len(b) > 0 {
			d += " with limits " + strings.Join(b, ", ")
		}
	}
	return d
}

// runs reports whether n is a shell session of shell, a name (zsh) or a
// path (/usr/bin/zsh).
func (n named) runs(shell string) bool {
	return n.language == "" && (shell == n.shell || shell == n.resolved || shell == n.opts.Shell ||
		n.shell == "" && shell == "bash")
}

// fresh is what the next run makes of n once it has ended, in words.
func (n named) fresh() string {
	f := "a new " + cmp.Or(n.shell, "shell") + " session"
	if n.language != "" {
		f = "a new " + n.language + " context"
	}
	if n.taken {
		f += ", " + envUntold
	}
	return f
}

// envUntold says what a session made again after a taken one lacks.
const envUntold = "without the environment variables the daemon's session was created with (the daemon does not tell them): set again those it needs"

// origin is how session found the session it returns.
type origin int

const (
	existing origin = iota // this server's, running
	created                // made from the run's options
	remade                 // made again, as it was, after it ended
	adopted                // the daemon's running session of that name (Shared)
)

// New returns a Server whose tools drive the daemon c.
func New(c *client.Client, version string) *Server {
	return &Server{c: c, version: version, sessions: map[string]named{}, creating: map[string]*creation{}, stopped: context.Background(), order: newOrder(), budget: newBudget(), next: map[string]string{}}
}

// MCP returns the MCP server with every tool added.
func (s *Server) MCP() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "conch", Version: s.version}, &mcp.ServerOptions{
		Instructions: instructions,
	})
	srv.AddReceivingMiddleware(refuseAmbiguousArguments)
	mcp.AddTool(srv, runTool, bound(s, s.run))
	mcp.AddTool(srv, interactTool, bound(s, s.interact))
	mcp.AddTool(srv, readTool, bound(s, s.readOutput))
	mcp.AddTool(srv, listTool, bound(s, s.list))
	mcp.AddTool(srv, closeTool, bound(s, s.closeSession))
	return srv
}

// bound is h, whose context also ends when the server stops: the SDK
// ends its connection only once every call under way has returned, so
// that a SIGTERM waited for the longest run's timeout (up to a day).
func bound[In, Out any](s *Server, h mcp.ToolHandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(s.stopped, cancel)()
		res, out, err := h(ctx, req, in)
		if err != nil && s.stopped.Err() != nil && errors.Is(err, context.Canceled) {
			// Not the HTTP client's words for it ("Post ...: context canceled").
			err = errStopping
		}
		return res, out, err
	}
}

// stopAnswers bounds how long a stopping server waits for the answers of
// the calls it cut short.
const stopAnswers = 2 * time.Second

// errStopping fails a call cut short because conch mcp is stopping.
var errStopping = errors.New("conch mcp is stopping (SIGTERM, SIGINT or SIGHUP): the call was cut short before its answer")

// submitTimeout bounds the submission of a command, which a cancellation
// does not cut short.
const submitTimeout = 30 * time.Second

// submit queues a command in the session id. A cancellation of ctx does not
// cut it short once sent, so that the caller learns the id of a command the
// daemon queued as the call was cancelled.
func (s *Server) submit(ctx context.Context, id string, opts client.CommandOptions) (*client.Process, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), submitTimeout)
	defer cancel()
	defer context.AfterFunc(s.stopped, cancel)()
	return s.c.Submit(sctx, id, opts)
}

// submitInTurn submits a run's command once the runs sent to session name
// before it were submitted (see order): prepare, in that turn too, finds
// or makes the session (so that the first run sent to a new session is the
// one that makes it, with its shell or language) and gives the session's
// id and the command's options. An error of prepare's is returned as is,
// with prepared false.
func (s *Server) submitInTurn(ctx context.Context, req *mcp.CallToolRequest, name string, prepare func() (string, client.CommandOptions, error)) (p *client.Process, prepared bool, err error) {
	t, ok := ticketOf(req)
	if !ok {
		id, opts, err := prepare()
		if err != nil {
			return nil, false, err
		}
		p, err := s.submit(ctx, id, opts)
		return p, true, err
	}
	defer s.order.leave(name, t)
	if err := s.order.wait(ctx, name, t); err != nil {
		return nil, true, err
	}
	sub, ok := s.order.submitting(t)
	if !ok {
		return nil, true, context.Canceled // the client cancelled the call: nothing is queued
	}
	id, opts, err := prepare()
	if err != nil {
		s.order.submitted(sub, "")
		return nil, false, err
	}
	p, err = s.submit(ctx, id, opts)
	queued := ""
	if err == nil {
		queued = p.ID
	}
	s.order.submitted(sub, queued)
	return p, true, err
}

// cancelledByClient reports whether the client cancelled the run call req,
// whose command the stdio gate interrupted then (see order.cancel).
func (s *Server) cancelledByClient(req *mcp.CallToolRequest) bool {
	t, ok := ticketOf(req)
	return ok && s.order.cancelledByClient(t)
}

// interrupt sends SIGINT to the command of a call the client cancelled
// (MCP: the receiver stops what it was asked to do); a command still
// queued ends without running. When the server stops, its end (or the
// daemon, with --url) sees to the commands.
func (s *Server) interrupt(id string) {
	if s.stopped.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.c.Kill(ctx, id, client.KillOptions{Signal: "INT"})
}

// Run serves the tools on stdin and stdout until stdin closes or ctx ends.
// A line that is no JSON-RPC message is answered with a JSON-RPC error and
// the server goes on; at the end of stdin, every request read is answered
// before Run returns.
func (s *Server) Run(ctx context.Context) error {
	s.stopped = ctx
	s.order.interrupt = s.interrupt
	t := &stdioTransport{in: os.Stdin, out: os.Stdout, order: s.order, budget: s.budget}
	// Once ctx ends, the calls under way end (bound) and are answered
	// before the connection goes, stopAnswers at most: an answer its
	// client has not read by then is given up.
	run, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(ctx, func() {
		t.stop(stopAnswers)
		cancel()
	})()
	err := s.MCP().Run(run, t)
	// Stopped as asked, an answer not read given up: the SDK reports the
	// end of its connection as it sees it first, the stop's cancel, the
	// failed write of the answer given up, or the read of the gate's pipe
	// that the connection closed as that write failed (io.ErrClosedPipe;
	// stdout's own errors are the system's).
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, errGaveUp) || errors.Is(err, io.ErrClosedPipe)) {
		return nil
	}
	return err
}

// session returns the session called name, creating it with opts (its
// shell or language, cwd and limits) when there is none yet: how says how
// it was found. A session of the name that has ended is made again as it
// was made, but with the cwd and limits opts give; a language that does not
// match its kind is an error, and a shell other than its own is ignored.
// With Shared, a daemon's running session of the name is taken first.
func (s *Server) session(ctx context.Context, name string, opts client.SessionOptions) (n named, how origin, err error) {
	for {
		s.mu.Lock()
		prev, known := s.sessions[name]
		if known && !prev.ended {
			s.mu.Unlock()
			return prev, existing, nil
		}
		if c, ok := s.creating[name]; ok {
			// Another call creates it: wait for that one, not for the
			// server's lock, which every other call needs meanwhile (a code
			// context's start held them all for its 15 s).
			s.mu.Unlock()
			select {
			case <-c.done:
			case <-ctx.Done():
				return named{}, existing, ctx.Err()
			}
			if c.err != nil && ctx.Err() == nil && !errors.Is(c.err, context.Canceled) {
				return named{}, existing, c.err
			}
			continue // created, or its caller gave up: look again
		}
		c := &creation{done: make(chan struct{})}
		s.creating[name] = c
		s.mu.Unlock()
		n, how, err = s.make(ctx, name, opts, prev, known)
		s.mu.Lock()
		delete(s.creating, name)
		if err == nil {
			s.sessions[name] = n
		} else {
			c.err = err
		}
		s.mu.Unlock()
		close(c.done)
		return n, how, err
	}
}

// make makes the session called name, or finds the daemon's (see
// session); prev is the one the name had, which has ended, when known.
func (s *Server) make(ctx context.Context, name string, opts client.SessionOptions, prev named, known bool) (named, origin, error) {
	if s.Shared {
		p, err := s.daemonSession(ctx, name, prev.id)
		if err != nil {
			return named{}, existing, fmt.Errorf("look for session %q: %w", name, explain(err))
		}
		if p != nil {
			return s.adopt(ctx, name, p.ID)
		}
	}
	how := created
	if known {
		if err := mismatch(name, prev, opts.Language); err != nil {
			return named{}, existing, err
		}
		how = remade
		again := prev.opts
		again.Cwd = cmp.Or(opts.Cwd, again.Cwd)
		if opts.Limits != nil {
			again.Limits = opts.Limits
		}
		opts = again
	}
	opts.Name = name
	// Shared, the name is the session's alone on the daemon: another
	// client creating it at the same moment makes it once, and the loser
	// takes the winner's.
	opts.UniqueName = s.Shared
	cctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	p, err := s.c.CreateSession(cctx, opts)
	var ce *client.Error
	if opts.UniqueName && errors.As(err, &ce) && ce.Code == client.CodeInvalidArgument && strings.Contains(ce.Message, `unknown field "uniqueName"`) {
		// A daemon of before uniqueName: as before it, the name may
		// get a session from each client creating it at that moment.
		opts.UniqueName = false
		p, err = s.c.CreateSession(cctx, opts)
	}
	if opts.UniqueName && errors.As(err, &ce) && ce.Code == client.CodeAlreadyExists && ce.SessionID != "" {
		return s.adopt(ctx, name, ce.SessionID)
	}
	opts.UniqueName = false
	if err != nil {
		return named{}, existing, fmt.Errorf("create session %q: %w", name, explain(err))
	}
	return named{id: p.ID, shell: p.Shell, resolved: p.ResolvedShell, language: p.Language, opts: opts, untold: known && prev.taken}, how, nil
}

// adopt takes the daemon's running session id, called name, as the daemon
// says it is (its shell, language, login, limits and leased port, and its
// directory now, the API telling no other), which the next run makes it
// again with once it has ended. Its environment variables the API does not
// tell: the session made again lacks them, and its answer says so.
func (s *Server) adopt(ctx context.Context, name, id string) (named, origin, error) {
	p, err := s.c.Session(ctx, id)
	if err != nil {
		return named{}, existing, fmt.Errorf("look at session %q (%s): %w", name, id, explain(err))
	}
	return named{id: p.ID, shell: p.Shell, resolved: p.ResolvedShell, language: p.Language, taken: true,
		opts: client.SessionOptions{Shell: p.Shell, Language: p.Language, Login: p.Login, Limits: p.Limits, Cwd: p.Cwd,
			LeasePort: len(p.Ports) > 0}}, adopted, nil
}

// daemonSession is the daemon's newest running session called name other
// than the one whose id is not, or nil when there is none.
func (s *Server) daemonSession(ctx context.Context, name, not string) (*client.Process, error) {
	all, err := s.c.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	var newest *client.Process
	for i := range all {
		p := &all[i]
		if p.Name != name || p.ID == not || p.Ended() {
			continue
		}
		// The daemon lists them oldest first: a tie goes to the later.
		if newest == nil || !p.CreatedAt.Time.Before(newest.CreatedAt.Time) {
			newest = p
		}
	}
	return newest, nil
}

// creation is a session being created: done is closed once it is, with err
// when it could not be.
type creation struct {
	done chan struct{}
	err  error
}

// createTimeout bounds the creation of a session: a daemon that does not
// answer (stopped, overloaded) fails the call rather than holding it.
const createTimeout = 2 * time.Minute

// maxNext bounds the commands whose last cursor is kept: past it one is
// forgotten for each new one (interact then reads what comes after its
// input, as without a cursor).
const maxNext = 4096

// answered notes where the answer r left its command's output, while the
// command runs on.
func (s *Server) answered(r Result) {
	s.nextMu.Lock()
	defer s.nextMu.Unlock()
	if !r.Running || r.Next == "" {
		delete(s.next, r.ID)
		return
	}
	if _, ok := s.next[r.ID]; !ok && len(s.next) >= maxNext {
		for id := range s.next { // any one: a map has no order
			delete(s.next, id)
			break
		}
	}
	s.next[r.ID] = r.Next
}

// lastNext is the cursor after the last answer for the command id, "" when
// none is known.
func (s *Server) lastNext(id string) string {
	s.nextMu.Lock()
	defer s.nextMu.Unlock()
	return s.next[id]
}

// forget drops the session called name, and with it its kind, if it still
// has id or has ended: the next run makes a new session.
func (s *Server) forget(name, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.sessions[name]; ok && (cur.id == id || cur.ended) {
		delete(s.sessions, name)
	}
}

// ended notes that the session called name has ended, if it still has id,
// and returns what the name now holds: the next run makes it again with
// the same kind (see session). ok is false when the name holds nothing
// (close_session forgot it).
func (s *Server) ended(name, id string) (n named, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok = s.sessions[name]
	if ok && n.id == id {
		n.ended = true
		s.sessions[name] = n
	}
	return n, ok
}

// names returns the session id → name map.
func (s *Server) names() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]string, len(s.sessions))
	for name, n := range s.sessions {
		m[n.id] = name
	}
	return m
}

// explain turns the daemon's errors into text that says what to do.
func explain(err error) error {
	var e *client.Error
	if !errors.As(err, &e) {
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			return fmt.Errorf("the conch daemon does not answer: is it running at the address conch mcp was given (--url)? (%w)", err)
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
			return fmt.Errorf("the conch daemon closed the connection before its answer: it may have stopped, or been stopped; call again once it is back (%w)", err)
		}
		return err
	}
	switch e.Code {
	case client.CodeInvalidArgument:
		return fmt.Errorf("invalid argument: %s", e.Message)
	case client.CodeNotFound:
		return fmt.Errorf("not found: %s (the list tool shows what exists)", e.Message)
	case client.CodeUnsupportedOperation:
		return fmt.Errorf("not possible: %s", e.Message)
	case client.CodeResourceExhausted:
		return fmt.Errorf("limit reached: %s (close sessions or wait for commands to end)", e.Message)
	}
	return err
}
