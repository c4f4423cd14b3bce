package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/conchsh/conch/api"
)

// Client calls one conch daemon. It is safe for concurrent use.
type Client struct {
	base   *url.URL
	token  string
	http   *http.Client
	direct *direct // the requests' way when the http.Client is the Client's own (see direct)
	// maxAnswer bounds the body of an answer read whole (MaxAnswer).
	maxAnswer int64
	// streamIdle is how long a log stream waits on the daemon (see
	// WithStreamIdleTimeout).
	streamIdle time.Duration
}

// MaxAnswer bounds the body of an answer a call reads whole, 256 MiB: past
// any answer under the daemon's default --log-retention (8 MiB), which
// bounds a run's outputLimit. A larger body (one with no end, say) ends the
// call with an error that says so, rather than be read into memory for as
// long as it comes. A log stream is not bounded so: it lasts, each of its
// events bounded instead (see Stream).
const MaxAnswer = 256 << 20

// Option configures a Client in New.
type Option func(*Client) error

// WithHTTPClient makes the Client send its requests through hc. The default
// is a client of its own with no overall timeout (streams last), which
// sends its requests to an http:// daemon with no proxy between on the
// caller's goroutine, one at a time on each connection it keeps.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("nil http client")
		}
		c.http = hc
		return nil
	}
}

// DefaultStreamIdleTimeout is how long a log stream waits for a byte from
// the daemon, and an attachment's Read for a message or a ping, before it
// gives up on it: three of the heartbeats the daemon sends every 15 s on a
// quiet stream or attachment, as the TypeScript and Python SDKs wait.
const DefaultStreamIdleTimeout = 45 * time.Second

// WithStreamIdleTimeout sets how long a log stream waits for a byte from the
// daemon, a heartbeat included, before it ends with an error that says so
// (see Stream), and how long an attachment's Read waits for a message or a
// ping (see Attachment.Read); DefaultStreamIdleTimeout by default.
func WithStreamIdleTimeout(d time.Duration) Option {
	return func(c *Client) error {
		if d <= 0 {
			return errors.New("stream idle timeout: want a positive duration")
		}
		c.streamIdle = d
		return nil
	}
}

// New returns a Client for the daemon at baseURL (http://127.0.0.1:7070)
// that authenticates with token.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		// Not url.Parse's words: 127.0.0.1:7070, with no scheme, fails
		// with "first path segment in URL cannot contain colon".
		return nil, fmt.Errorf("daemon url %q: want http://host:port", baseURL)
	}
	c := &Client{base: u, token: token, maxAnswer: MaxAnswer, streamIdle: DefaultStreamIdleTimeout}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	if c.http == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxResponseHeaderBytes = maxHeaderBytes
		c.http = &http.Client{Transport: tr}
		c.direct = newDirect(u)
	}
	return c, nil
}

// CloseIdleConnections closes the connections kept for later requests.
func (c *Client) CloseIdleConnections() {
	c.http.CloseIdleConnections()
	if c.direct != nil {
		c.direct.closeIdle()
	}
}

// URL returns the daemon's base URL.
func (c *Client) URL() string { return c.base.String() }

// Code is an API error code; package api defines the codes.
type Code = api.Code

// The API's error codes.
const (
	CodeInvalidArgument      = api.CodeInvalidArgument
	CodeUnauthenticated      = api.CodeUnauthenticated
	CodePermissionDenied     = api.CodePermissionDenied
	CodeNotFound             = api.CodeNotFound
	CodeUnsupportedOperation = api.CodeUnsupportedOperation
	CodePayloadTooLarge      = api.CodePayloadTooLarge
	CodeResourceExhausted    = api.CodeResourceExhausted
	CodeInternal             = api.CodeInternal
	CodeDraining             = api.CodeDraining
	CodeStdinFull            = api.CodeStdinFull
	CodeAlreadyExists        = api.CodeAlreadyExists
)

// Error is an error answered by the daemon.
type Error struct {
	Status  int    // the HTTP status
	Code    Code   `json:"code"`
	Message string `json:"message"`
	// AcceptedBytes is, for stdin_full, how many bytes of the write were
	// queued.
	AcceptedBytes int `json:"acceptedBytes,omitempty"`
	// SessionID is, for already_exists, the running session whose name a
	// session created with uniqueName asked for.
	SessionID string `json:"sessionId,omitempty"`
	// RetryAfter is how long the daemon asked to be left before the
	// request is sent again (its Retry-After header: 1 s for a draining
	// daemon's 503); zero when it did not say. The Client never sends a
	// request again by itself: a refused one (draining, resource_exhausted)
	// created nothing, and may be sent again once that time has passed.
	RetryAfter time.Duration `json:"-"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (%d): %s", e.Code, e.Status, e.Message)
}

// Is makes errors.Is(err, &Error{Code: CodeNotFound}) match any error with
// that code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Status == 0 || t.Status == e.Status)
}

// HasCode reports whether err is an *Error with code.
func HasCode(err error, code Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// request is one call to the daemon.
type request struct {
	method string
	path   string
	query  url.Values
	body   any       // marshalled as JSON when not nil
	raw    io.Reader // sent as is when not nil
	header http.Header
	stream bool // the answer lasts: its body is not bounded by maxAnswer
}

// send performs req and returns the response when its status is one of ok;
// any other status is decoded as an *Error.
func (c *Client) send(ctx context.Context, req request, ok ...int) (*http.Response, error) {
	u, err := c.endpoint(req.path)
	if err != nil {
		return nil, err
	}
	u.RawQuery = req.query.Encode()
	var body io.Reader = req.raw
	if req.body != nil {
		b, err := json.Marshal(req.body)
		if err != nil {
			return nil, err
		}
		// encoding/json writes each byte of a string that is not UTF-8 as
		// the escape \ufffd (a U+FFFD that was there goes as itself): only
		// a body with that escape can hold such a string, and only then
		// is the body walked for it, which costs more than the encoding.
		if bytes.Contains(b, []byte(`\ufffd`)) {
			if at := notText(reflect.ValueOf(req.body), ""); at != "" {
				return nil, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf(
					"%s is not UTF-8: the API takes text as UTF-8 (bytes go as base64 where it takes them, as interact's inputBase64)", at)}
			}
		}
		body = bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u.String(), body)
	if err != nil {
		return nil, err
	}
	for k, v := range req.header {
		hr.Header[k] = v
	}
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	var resp *http.Response
	if c.direct != nil {
		resp, err = c.direct.roundTrip(hr)
	} else {
		resp, err = c.http.Do(hr)
	}
	if err != nil {
		return nil, err
	}
	for _, s := range ok {
		if resp.StatusCode == s {
			if req.stream {
				return resp, nil
			}
			if resp.ContentLength > c.maxAnswer {
				resp.Body.Close()
				return nil, fmt.Errorf("%s %s: %w", req.method, req.path, &tooLarge{limit: c.maxAnswer, length: resp.ContentLength})
			}
			resp.Body = &boundedBody{ReadCloser: resp.Body, left: c.maxAnswer + 1, limit: c.maxAnswer}
			return resp, nil
		}
	}
	defer closeBody(resp)
	return nil, decodeError(resp)
}

// tooLarge says that an answer's body is larger than a Client reads: not
// the daemon's answer.
type tooLarge struct {
	limit  int64
	length int64 // its Content-Length; -1 when it did not say
}

func (e *tooLarge) Error() string {
	if e.length >= 0 {
		return fmt.Sprintf("an answer of %d bytes, over %d bytes, larger than any of the API: not the daemon's", e.length, e.limit)
	}
	return fmt.Sprintf("an answer over %d bytes, larger than any of the API: not the daemon's", e.limit)
}

// boundedBody is an answer's body that fails once more than limit bytes
// came.
type boundedBody struct {
	io.ReadCloser
	left  int64 // bytes it may read: limit+1, so that one past the bound is seen
	limit int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, &tooLarge{limit: b.limit, length: -1}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); b.left <= 0 {
		return n - 1, &tooLarge{limit: b.limit, length: -1}
	}
	return n, err
}

// closeBody reads what is left of an answer — the newline after a JSON
// value, say — and closes it: a connection whose last answer was not read to
// its end is not used again, and each request would pay for a new one.
func closeBody(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var env struct {
		Error *Error `json:"error"`
	}
	if json.Unmarshal(b, &env) == nil && env.Error != nil && env.Error.Code != "" {
		env.Error.Status = resp.StatusCode
		env.Error.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
		return env.Error
	}
	// Not the daemon's answer (a proxy's page, another server): say the
	// status, and what came, shortly.
	text := strings.TrimSpace(string(b))
	if len(text) > 200 {
		text = text[:200] + "..."
	}
	msg := fmt.Sprintf("HTTP %d %s, an answer that is not the daemon's", resp.StatusCode, http.StatusText(resp.StatusCode))
	if text != "" {
		msg += ": " + text
	}
	return &Error{Status: resp.StatusCode, Code: CodeInternal, Message: msg,
		RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
}

// retryAfter reads a Retry-After header, seconds or an HTTP date; zero
// when there is none, or it says nothing usable.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now).Round(time.Second)
	}
	return 0
}

// call performs req and decodes a JSON answer into out (unless out is nil).
// It returns the status, one of ok.
func (c *Client) call(ctx context.Context, req request, out any, ok ...int) (int, error) {
	resp, err := c.send(ctx, req, ok...)
	if err != nil {
		return 0, err
	}
	defer closeBody(resp)
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: decode answer: %w", req.method, req.path, err)
	}
	return resp.StatusCode, nil
}

// Health asks whether the daemon is up; it needs no token.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	_, err := c.call(ctx, request{method: http.MethodGet, path: "/healthz"}, &h, http.StatusOK)
	return &h, err
}
