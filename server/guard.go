package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/conchsh/conch/api"
	"github.com/conchsh/conch/internal/hostcheck"
)

// statusWriter remembers whether the answer has begun, so that an error
// after that is logged rather than written into the middle of a body.
type statusWriter struct {
	http.ResponseWriter
	wrote  bool
	status int // the status sent, for the log and the metrics
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote || w.status < 200 {
		w.status = code
	}
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.status = http.StatusOK
	}
	w.wrote = true
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController and the WebSocket upgrade reach the
// connection's Flusher and Hijacker.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush sends what was written so far; streams rely on it.
func (w *statusWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush that reports a failed write, such as one past a
// stream's write deadline; http.ResponseController prefers it.
func (w *statusWriter) FlushError() error {
	if !w.wrote {
		w.status = http.StatusOK
	}
	w.wrote = true
	err := http.NewResponseController(w.ResponseWriter).Flush()
	if errors.Is(err, http.ErrNotSupported) {
		return nil // a server of the caller's that buffers: nothing failed
	}
	return err
}

// handlerFunc is a handler that returns its error for writeError to render.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// route is one line of the route table.
type route struct {
	pattern string // method and path, as http.ServeMux takes them
	handler handlerFunc
	public  bool     // served without a token
	query   []string // the query parameters it reads; any other is refused
	// newWork says that the route starts new work (a process, session,
	// command or cell), which a drain refuses: refused before its body is
	// read, and owed nothing meanwhile, so that a body still coming
	// cannot hold the drain.
	newWork bool
}

// wrap turns a route into an http.Handler: a recovered panic answers 500,
// then the Host and Origin checks, the token, the query string's check, the
// route's body limit, and the handler's error rendered by writeError. Around
// it all, the request is given an id, counted in the metrics and logged, and
// (but for probes, health and metrics) counted as owed an answer by a drain.
func (s *Server) wrap(rt route) http.Handler {
	limit, flag := s.bodyLimit(rt.pattern)
	counted := s.metrics.forRoute(rt.pattern)
	level := slog.LevelInfo
	if quietRoute(rt.pattern) {
		level = slog.LevelDebug
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := &statusWriter{ResponseWriter: rw}
		if r.ContentLength != 0 {
			// net/http reads what is left of a body under 256 KiB before
			// it writes an answer's header, with no bound: a refusal, or
			// a route that takes no body, waited for a client that
			// stopped sending one (the 401 came when readRest's bound
			// ran out, the GET never). In full duplex it does not; what
			// is left is read after the answer, under readRest's bounds.
			_ = http.NewResponseController(rw).EnableFullDuplex()
		}
		// Last, once answered (not after a panic that aborts the
		// answer): the rest of a body the answer did not need.
		aborted, rest := false, r.Body
		var body *boundedBody
		defer func() {
			if !aborted && (body == nil || !body.stalled) {
				s.readRest(w, r, rest)
			}
		}()
		headersRead(w, r)
		begun := time.Now()
		id := requestID(r)
		w.Header().Set("X-Request-Id", id)
		refused := rt.newWork && s.drainingNow()
		if !rt.public && !quietRoute(rt.pattern) && !listRoute(rt.pattern) && !refused {
			settle := s.owe()
			defer settle()
			r = r.WithContext(context.WithValue(r.Context(), owedKey{}, settle))
		}
		defer func() {
			d := time.Since(begun)
			status := answered(w.status)
			if body != nil && body.cut {
				// Whatever was answered, no one was there to read it.
				status = statusClientGone
			}
			counted.request(status, d)
			s.line(r.Context(), level, "request", slog.String("route", rt.pattern),
				slog.Int("status", status), slog.Float64("durationMs", float64(d.Microseconds())/1000),
				slog.String("requestId", id))
		}()
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					aborted = true
					panic(v)
				}
				s.log.Error("panic in handler", "method", r.Method, "path", r.URL.Path,
					"panic", v, "stack", string(debug.Stack()))
				s.writeError(w, r, errorf(http.StatusInternalServerError, "internal", "internal error"))
			}
		}()
		if err := s.checkHostOrigin(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		if !rt.public && !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="conch"`)
			s.writeError(w, r, errorf(http.StatusUnauthorized, "unauthenticated", "missing or wrong bearer token"))
			return
		}
		if err := checkQuery(r.URL.RawQuery, rt.query, rt.pattern != "/"); err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := checkEncoding(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		if refused {
			s.writeError(w, r, ErrDraining)
			return
		}
		held := &s.bodies
		if limit <= smallBodyLimit && s.bodies.limit > 2*smallBodyLimit {
			held = &s.smallBodies // kill and resize: see Server.smallBodies
		}
		body = &boundedBody{ReadCloser: http.MaxBytesReader(w, r.Body, limit), limit: limit, flag: flag, held: held,
			w: w, idle: time.Duration(s.bodyIdle.Load()), grace: time.Duration(s.bodyGrace.Load()), said: r.ContentLength}
		defer func() { held.used.Add(-body.taken) }()
		r.Body = body
		if err := rt.handler(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// readRest reads what is left of a request's body once it is answered, and
// discards it, at most restBytes for at most restFor: an answer that came
// before the body was read through (a wrong token, a route that does not
// exist, a body over its limit) would otherwise meet a client that sends
// its whole body before it reads the answer — Python's http.client and
// urllib do — with a closed connection, and that client would see a broken
// pipe rather than the answer. net/http reads on only 256 KiB. The answer
// is sent first, for clients that read it as they send. A body read
// through lets the connection serve on; past the bounds it is closed, as
// before. A client that asked to be told to go on (Expect: 100-continue)
// and was not has sent no body: nothing is read, which would ask for it.
func (s *Server) readRest(w http.ResponseWriter, r *http.Request, body io.ReadCloser) {
	if body == nil || body == http.NoBody || r.ContentLength == 0 ||
		strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		return
	}
	// A body the handler read through, as most are, says so at once, with
	// no system call. (A chunked one might wait for its next chunk's size:
	// it is read under the deadline below.)
	if r.ContentLength > 0 {
		if _, err := body.Read(nil); err != nil {
			return
		}
	}
	// The bound comes first, then the answer goes, if it has not: a request
	// with a body is served in full duplex (see wrap), so that writing the
	// answer's header reads none of it.
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(time.Duration(s.restFor.Load()))) != nil || rc.Flush() != nil {
		return
	}
	// Refused, the connection serves no request while it reads the rest:
	// it may be closed to make room, as an idle one may, though after any
	// that holds no request (see idleConns.closeIdlest). A client that
	// sent bodies a byte at a time to refusals (a 401 needs no token)
	// held every place for the rest's bound, again and again. An answer
	// that is no refusal may still be waited for until the rest is read
	// (its end goes then).
	if sw, ok := w.(*statusWriter); ok && sw.status >= 400 {
		if jc, ok := r.Context().Value(connKey{}).(*jsonErrorConn); ok {
			jc.readingRest()
		}
	}
	buf := restBuffers.Get().(*[32 << 10]byte)
	defer restBuffers.Put(buf)
	for left := s.restBytes.Load(); left > 0; {
		n, err := body.Read(buf[:min(left, int64(len(buf)))])
		left -= int64(n)
		if err == io.EOF {
			// Read through: the connection serves on, net/http setting
			// the next request's deadline.
			_ = rc.SetReadDeadline(time.Time{})
			return
		}
		if err != nil {
			return // the deadline stays: what net/http reads of it after this fails at once, and the connection closes
		}
	}
}

var restBuffers = sync.Pool{New: func() any { return new([32 << 10]byte) }}

// checkQuery refuses a query string that would be read otherwise than it
// was written: url.ParseQuery drops a pair with a semicolon or a bad escape
// and carries on, so that logs?cursor=1;2 would read from the start. A
// parameter given twice, or not valid UTF-8, is refused too, and so is one
// the route does not read (known lists those it does) when strict (not
// for the catch-all that answers 404 or 405), as an unknown field of a body
// is: stdin?EOF=true would leave stdin open.
func checkQuery(raw string, known []string, strict bool) error {
	if raw == "" {
		return nil
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return badRequest("query string: %v", err)
	}
	for k, vs := range q {
		if len(vs) > 1 {
			return badRequest("query parameter %q given %d times: give it once", k, len(vs))
		}
		if !utf8.ValidString(k) || !utf8.ValidString(vs[0]) {
			return badRequest("query parameter %q is not valid UTF-8", k)
		}
		if strict && !slices.Contains(known, k) {
			if len(known) == 0 {
				return badRequest("query parameter %q: this route takes none", k)
			}
			return badRequest("query parameter %q: this route takes %s", k, strings.Join(known, ", "))
		}
	}
	return nil
}

// checkEncoding refuses a body sent with a content coding (gzip, ...):
// the daemon decodes none, and read as it came a gzipped stdin write
// reached the process compressed, and a JSON body a proxy would have
// decoded otherwise ran as the daemon read it. 415 is HTTP's answer to a
// coding the server does not take; identity is no coding. A route that
// takes no body (GET, DELETE) reads none: what it is sent is discarded,
// never refused, its coding too.
func checkEncoding(r *http.Request) error {
	switch {
	case r.ContentLength == 0:
		return nil
	case r.Method == http.MethodGet, r.Method == http.MethodHead, r.Method == http.MethodDelete:
		return nil
	}
	for _, v := range r.Header.Values("Content-Encoding") {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return errorf(http.StatusUnsupportedMediaType, api.CodeInvalidArgument,
					"Content-Encoding %q: the daemon takes bodies as they are, with no content coding", c)
			}
		}
	}
	return nil
}

// quietRoute reports whether a route is for machines that call it often
// (probes, metrics): its requests are logged at debug level and are not
// owed an answer by a drain.
func quietRoute(pattern string) bool {
	switch pattern {
	case "GET /healthz", "GET /livez", "GET /readyz", "GET /metrics":
		return true
	}
	return false
}

// listRoute reports whether a route lists what the daemon runs, as a
// dashboard or `watch conch ps` asks every second or so: a drain does not
// wait for its requests, nor linger after them (see drainLinger), or such a
// poller would hold every drain to its --drain-timeout.
func listRoute(pattern string) bool {
	return pattern == "GET /v1/processes" || pattern == "GET /v1/sessions"
}

// requestID returns the request's X-Request-Id when it is a short token
// (letters, digits, '.', '_', '-'), so that a caller's id can be followed
// into the log; otherwise a new random one.
func requestID(r *http.Request) string {
	if v := r.Header.Get("X-Request-Id"); v != "" && len(v) <= 64 && strings.Trim(v,
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == "" {
		return v
	}
	return rand.Text()
}

// authorized compares the request's bearer token with the daemon's in
// constant time.
func (s *Server) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(s.opts.Token)) == 1
}

// checkHostOrigin refuses a request whose Host is not one of the daemon's
// names, and a browser request from another origin: a web page must not
// drive a daemon that runs shell commands, through DNS rebinding or
// otherwise.
func (s *Server) checkHostOrigin(r *http.Request) error {
	if !s.allowedHost(r.Host) {
		return errorf(http.StatusForbidden, "permission_denied", "host %q is not allowed", r.Host)
	}
	// Present, even empty, it must name this daemon (docs/api.md).
	if _, present := r.Header["Origin"]; !present {
		return nil
	}
	origin := r.Header.Get("Origin")
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host != r.Host {
		return errorf(http.StatusForbidden, "permission_denied", "origin %q is not allowed", origin)
	}
	return nil
}

// allowedHost reports whether hostport, a Host header, names this daemon:
// localhost, a loopback IP literal, the listen address or an extra allowed
// host, each with an optional port. Anything else is refused, malformed or
// not: in 127.0.0.1:7191.evil.com the port is no port, [::1 is no host.
func (s *Server) allowedHost(hostport string) bool {
	host, ok := hostcheck.Split(hostport)
	if !ok {
		return false
	}
	if hostcheck.Loopback(host) {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok = s.hosts[host]
	return ok
}

// addListenHosts allows the names of the listen address: its host, and
// every address of this machine when it listens on all of them.
func (s *Server) addListenHosts(addr net.Addr) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return
	}
	names := []string{tcp.IP.String()}
	if tcp.IP.IsUnspecified() {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok {
					names = append(names, n.IP.String())
				}
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range names {
		s.hosts[hostcheck.Canonical(n)] = struct{}{}
	}
}
