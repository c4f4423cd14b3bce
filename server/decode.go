package server

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/conchsh/conch/api"
)

// maxDepth is how deep a request body's arrays and objects may nest. The
// deepest body of any route nests three levels; 64 leaves room for every
// future one while a hostile body stays cheap to refuse.
const maxDepth = 64

// decodeJSON reads the request body into v. An empty body leaves v as it is;
// malformed JSON, nesting past maxDepth, a string that is not valid UTF-8,
// unknown or misspelt fields, duplicate keys and trailing data are
// invalid_argument, a body over the route's limit payload_too_large. Time
// and memory are linear in the body.
func decodeJSON(r *http.Request, v any) error {
	_, err := readBodyJSON(r, v, false)
	doneWithBody(r)
	return err
}

// doneWithBody gives back the place r's body held under the bodies' budget
// once it is decoded, and its bytes are no longer needed: a route that
// then waits (a run, an interact, for as long as its command runs) held
// it all the while, and two 16 MiB bodies of commands that ran on kept
// every other request with a body refused.
func doneWithBody(r *http.Request) {
	if b, ok := r.Body.(*boundedBody); ok && b.held != nil && b.taken > 0 {
		b.held.used.Add(-b.taken)
		b.taken = 0
	}
}

// readJSON is decodeJSON that also returns the names of the body's
// top-level fields given a value other than null (none for an empty or
// blank body, or a null one).
func readJSON(r *http.Request, v any) ([]string, error) { return readBodyJSON(r, v, true) }

// readBodyJSON is readJSON, whose field names are looked for only when
// given is set: most routes have no use for them.
func readBodyJSON(r *http.Request, v any, given bool) ([]string, error) {
	data, err := readBody(r)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, badRequest("read body: %v", err)
	}
	if isSpace(data) {
		return nil, nil
	}
	b, _ := r.Body.(*boundedBody)
	names, err := unmarshal(data, v, given, func(count int64) error { return b.holdElement(count, len(data)) })
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, badRequest("malformed JSON body: %v", err)
	}
	return names, nil
}

// bodyFirstBuffer is the most of a body's Content-Length its buffer is
// made for at first: the buffer grows twofold as the body comes.
const bodyFirstBuffer = 64 << 10

// readBody reads the whole body into a buffer that counts against the
// bodies' budget before it is made, so that the daemon holds no more than
// the budget (100 connections that declared 16 MiB each, each read into a
// buffer of its size, took 1.6 GB of heap). The buffer is made for what
// came, not for what the Content-Length says will: it starts at
// bodyFirstBuffer at most and grows twofold as it fills, never past the
// Content-Length, so that a large body allocates about twice its size,
// and one that trickles holds at most twice what came of it. Two that
// declared near --body-limit each, held whole from the start, then sent a
// byte every few seconds, kept every other body refused for as long as
// they did; grown fourfold, two that sent 4 MiB each, then trickled, held
// the whole budget for 46 s. Such bodies can still fill it, for as long
// as the rate bodyGrace asks lets them, at the cost of sending half of
// it: the small bodies of kill and resize have a budget of their own
// (see Server.smallBodies).
func readBody(r *http.Request) ([]byte, error) {
	b, _ := r.Body.(*boundedBody)
	size := int64(-1) // unknown
	if r.ContentLength > 0 {
		size = r.ContentLength
		if b != nil && size > b.limit {
			size = b.limit
		}
	}
	if b != nil {
		b.sized = true // its buffer counts, not the bytes read
	}
	first := int64(512)
	if size >= 0 {
		first = min(size, bodyFirstBuffer)
	}
	if err := b.hold(first + 1); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, first+1) // +1: room to read the end
	for {
		if len(buf) == cap(buf) {
			// Made to its size rather than by append, whose growth
			// may overshoot the Content-Length by a quarter.
			grown := 2 * int64(cap(buf))
			if end := bodyEnd(b, size); end > int64(cap(buf)) {
				grown = min(grown, end)
			}
			if err := b.hold(grown - int64(cap(buf))); err != nil {
				return nil, err
			}
			buf = append(make([]byte, 0, grown), buf...)
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// bodyEnd is the most a buffer for a body of size bytes (-1: unknown)
// needs: room for the body and for reading its end.
func bodyEnd(b *boundedBody, size int64) int64 {
	switch {
	case size >= 0:
		return size + 1
	case b != nil:
		return b.limit + 1
	}
	return math.MaxInt64
}

// boundedBody is a request body under its route's limit; a read past the
// limit fails with the API's 413, which names the limit and where it comes
// from. What it read counts against the bytes of all the bodies being
// read, which held refuses past its limit with 429; the handler's wrapper
// gives them back once the request is answered.
type boundedBody struct {
	io.ReadCloser // an http.MaxBytesReader of limit
	limit         int64
	flag          string // the flag that sets limit, if one does
	// said is the body's Content-Length (-1: unknown). Over limit, the
	// body is refused at its first read, before a byte of it is read and
	// before a client that sent Expect: 100-continue is told to go on;
	// the route has looked at what comes first (a path's id).
	said  int64
	held  *bodyBudget // nil: not counted
	taken int64       // what this body holds of held
	sized bool        // held counts readBody's buffer, not the bytes read
	// w is the request's writer, whose connection's reads a Read bounds
	// by idle: a client that stops sending its body would hold its place
	// under held, and readBody's buffer, for as long as it keeps the
	// connection open. Zero idle, or a nil w, bounds nothing.
	w    http.ResponseWriter
	idle time.Duration
	rc   *http.ResponseController // w's, made by the first Read
	// grace is how long the body may come in slowly: past it, it must
	// have come at bodyMinRate since began, came being what came of it
	// (see bodyGrace). Zero bounds nothing.
	grace time.Duration
	began time.Time
	came  int64
	// slow says that the read deadline set is the rate's, not idle's.
	slow bool
	// stalled is set once no byte came for idle, or the body fell behind
	// the rate: what is left of it is not waited for.
	stalled bool
	// cut is set once the connection ended before the body was whole:
	// the client went away, and the request counts as one whose client
	// went away before its answer, not as a malformed body.
	cut bool
}

// bodyBudget bounds the bytes of the request bodies being read and decoded
// at once: each is bounded by --body-limit, but 40 at once took the daemon
// to 824 MB, at its memory limit.
type bodyBudget struct {
	used  atomic.Int64
	limit int64
	what  string // how its limit is set, for messages
}

// take counts n more bytes, or refuses them past the limit.
func (b *bodyBudget) take(n int64) bool {
	if b.used.Add(n) > b.limit {
		b.used.Add(-n)
		return false
	}
	return true
}

// hold counts n more bytes of the body against the bodies' budget, or
// refuses them past it. A nil body, or one not counted, holds nothing.
func (b *boundedBody) hold(n int64) error {
	if b == nil || b.held == nil {
		return nil
	}
	if !b.held.take(n) {
		return &Error{http.StatusTooManyRequests, api.CodeResourceExhausted, fmt.Sprintf(
			"the request bodies being read at once are over %d bytes (%s): send this one again once others are answered",
			b.held.limit, b.held.what), nil}
	}
	b.taken += n
	return nil
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.said > b.limit {
		return 0, b.tooLarge(nil)
	}
	bounded := b.w != nil && b.idle > 0
	if bounded {
		now := time.Now()
		if b.rc == nil {
			b.rc = http.NewResponseController(b.w)
			b.began = now
		}
		deadline := now.Add(b.idle)
		b.slow = false
		if b.grace > 0 {
			due := b.began.Add(b.grace + time.Duration(float64(b.came)/bodyMinRate*float64(time.Second)))
			if due.Before(deadline) {
				deadline, b.slow = due, true
			}
		}
		// A server that cannot set deadlines (one of an embedder's)
		// leaves the read unbounded, as it was.
		bounded = b.rc.SetReadDeadline(deadline) == nil
	}
	n, err := b.ReadCloser.Read(p)
	b.came += int64(n)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		b.cut = true
	}
	if bounded && err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			b.stalled = true
			// The connection closes after the answer, and the deadline,
			// passed, stays: net/http would otherwise read what is left
			// of a short body as it ends the request, and the connection
			// stayed open, holding a place under --max-connections, for
			// as long as the client kept it.
			_ = b.rc.SetReadDeadline(time.Now())
			b.w.Header().Set("Connection", "close")
			msg := fmt.Sprintf("request body: no byte came for %v; send it again whole", b.idle)
			if b.slow {
				msg = fmt.Sprintf("request body: came slower than %d KiB/s past its first %v (%d bytes in %v); send it again whole, faster",
					bodyMinRate>>10, b.grace, b.came, time.Since(b.began).Round(time.Millisecond))
			}
			return n, &Error{http.StatusRequestTimeout, api.CodeInvalidArgument, msg, err}
		}
		// The body is read (or failed): the connection's reads are the
		// server's again, which watches it for the client going away
		// while the handler works (net/http clears the deadline itself
		// as it begins to; a server of an embedder's may not).
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	if n > 0 && !b.sized {
		if herr := b.hold(int64(n)); herr != nil {
			return 0, herr
		}
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		err = b.tooLarge(err)
	}
	return n, err
}

// decodedElementCost is what the bodies' budget counts for each array
// element and object member of a body, besides its bytes: about what one
// costs decoded, an env member the most (its map slot, its key's string,
// the check of its key against the others'). An element is worth far
// more decoded than its few bytes of JSON: two bodies of 16 MB of empty
// argv elements ("",) took 525 MB to decode, where the budget counted
// 32 MB.
const decodedElementCost = 256

// holdElement counts the count-th array element or object member of a
// body of size bytes against the bodies' budget, before it is decoded. A
// body that with its elements is more than the whole budget is refused,
// 413: it would be refused however few others were read. The refusal says
// how many elements a body of its size may hold, which the client can act
// on, rather than the bytes of its buffer, which the client does not see.
// A nil body, or one not counted, holds nothing.
func (b *boundedBody) holdElement(count int64, size int) error {
	if b == nil || b.held == nil {
		return nil
	}
	if b.taken+decodedElementCost > b.held.limit {
		return &Error{http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge, fmt.Sprintf(
			"request body holds too many array elements and object members: a body of %d bytes may hold at most %d array elements and object members, and this one holds more (each is counted %d bytes, about what it costs decoded, with the body's own bytes against the request bodies' budget of %d bytes, %s): send fewer in one request",
			size, count-1, decodedElementCost, b.held.limit, b.held.what), nil}
	}
	return b.hold(decodedElementCost)
}

// tooLarge is the API's 413 for a body over the limit, wrapping err.
func (b *boundedBody) tooLarge(err error) error {
	msg := fmt.Sprintf("request body over %d bytes, the most this route takes", b.limit)
	if b.flag != "" {
		msg = fmt.Sprintf("request body over %d bytes (%s)", b.limit, b.flag)
	}
	return &Error{http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge, msg, err}
}

// unmarshalStrict decodes data into v as encoding/json does, but refuses
// what encoding/json lets through: a key that matches a field only when case
// is ignored, a key given twice in one object (encoding/json keeps the
// last), and strings that are not valid UTF-8 (encoding/json makes each bad
// byte U+FFFD). A proxy that validates bodies before they reach the daemon
// must see the command that runs: {"cmd":"true","CMD":"rm -rf ~"} is
// refused, not run. Nesting is bounded by maxDepth before encoding/json
// sees the body. A value of the wrong JSON type, or that its field's type
// refuses, is refused naming the field by its path ("terminal.cols",
// "argv[1]"), which encoding/json does not do for a type that decodes
// itself (api.Millis) nor for an element of an array or map.
func unmarshalStrict(data []byte, v any) error {
	_, err := unmarshal(data, v, false, func(count int64) error {
		if count > unheldElements {
			return fmt.Errorf("more than %d array elements and object members", unheldElements)
		}
		return nil
	})
	return err
}

// unheldElements bounds the array elements and object members of what
// unmarshalStrict decodes (a WebSocket message), which no budget counts.
const unheldElements = 4096

// unmarshal is unmarshalStrict that also returns, when given is set, the
// names of the top-level fields data gives a value other than null: which
// of two fields a body gave, where the zero value decoded says nothing of
// it ("cmd": "" is a command, an absent cmd none). Each array element and
// object member is given to hold, counted from 1, before it is read: an
// error of hold's refuses the data.
func unmarshal(data []byte, v any, given bool, hold func(count int64) error) ([]string, error) {
	c := checker{data: data, record: given, hold: hold}
	if err := c.value(reflect.TypeOf(v), 0); err != nil {
		return nil, err
	}
	c.skipSpace()
	if c.pos < len(c.data) {
		return nil, errors.New("data after the JSON value")
	}
	if c.mistyped != nil {
		return nil, c.mistyped
	}
	// Every key and value was checked against the fields above: unknown
	// fields and values of the wrong type cannot reach Unmarshal, which
	// reads data in place.
	return c.given, json.Unmarshal(data, v)
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// numberType is json.Number, a string that takes a number.
var numberType = reflect.TypeFor[json.Number]()

// selfDecoding holds decodesItself by type.
var selfDecoding sync.Map // reflect.Type → bool

// decodesItself reports whether encoding/json hands a value of t to t's
// own UnmarshalJSON or UnmarshalText.
func decodesItself(t reflect.Type) bool {
	if v, ok := selfDecoding.Load(t); ok {
		return v.(bool)
	}
	pt := reflect.PointerTo(t)
	v := t.Implements(unmarshalerType) || pt.Implements(unmarshalerType) ||
		t.Implements(textUnmarshalerType) || pt.Implements(textUnmarshalerType)
	selfDecoding.Store(t, v)
	return v
}

// decodeSelf gives raw, one JSON value the checker read, to t's own decoder
// as json.Unmarshal would: to UnmarshalJSON itself when *t has one, which
// json.Unmarshal calls after it scans raw once more (4 µs of a session
// command's timeout after a fork), else through json.Unmarshal.
func decodeSelf(t reflect.Type, raw []byte) error {
	v := reflect.New(t).Interface()
	if u, ok := v.(json.Unmarshaler); ok {
		return u.UnmarshalJSON(raw)
	}
	return json.Unmarshal(raw, v)
}

// checker reads one JSON value in one pass, iteratively within each array
// and object and recursively at most maxDepth deep, checking the syntax,
// the depth, that every string is valid UTF-8, and each value against the
// Go type it will be decoded into: its JSON type, a number's range, a
// struct's keys, which must be exactly its fields' JSON names, and no
// object may repeat a key (a map's keys are data, compared exactly). A
// value whose type decodes itself is given to that type's decoder, once it
// was read with its duplicates checked. A nil type (an interface) takes any
// value. path is where the checker is, formatted only for an error.
//
// The first value of the wrong type is kept in mistyped, and the value is
// read on as one of a nil type: as encoding/json does, a body that is also
// malformed, too deep or holds an unknown key is refused for that.
type checker struct {
	data     []byte
	pos      int
	path     []pathElem
	inKey    bool  // reading an object's key, not a value
	mistyped error // the first value its type does not take
	// elem says that the value read next is an element of an array,
	// where null is no absent field: encoding/json would make it the
	// element type's zero value (an empty argument of argv).
	elem bool
	// given holds the keys of the top-level object whose values are not
	// null, in the order read, when record is set.
	record bool
	given  []string
	// hold is given each array element and object member, counted in
	// elements, before it is read (see unmarshal).
	hold     func(count int64) error
	elements int64
}

// element counts one more array element or object member.
func (c *checker) element() error {
	c.elements++
	return c.hold(c.elements)
}

// pathElem is one step of a path: an object's key, or an array's index.
type pathElem struct {
	key   string
	index int // when key is ""
	isKey bool
}

// where names the value being read, as "terminal.cols" or "argv[1]".
func (c *checker) where() string {
	var b strings.Builder
	for _, e := range c.path {
		if e.isKey {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(e.key)
		} else {
			b.WriteString("[" + strconv.Itoa(e.index) + "]")
		}
	}
	return b.String()
}

func (c *checker) value(t reflect.Type, depth int) error {
	elem := c.elem
	c.elem = false
	c.skipSpace()
	if c.pos >= len(c.data) {
		return errors.New("unexpected end of JSON input")
	}
	pointer := false
	for t != nil && t.Kind() == reflect.Pointer {
		t, pointer = t.Elem(), true
	}
	if t != nil && t.Kind() == reflect.Interface {
		t = nil
	}
	// null makes a pointer nil, where a value that decodes itself is
	// given null too.
	if t != nil && decodesItself(t) && !(pointer && c.data[c.pos] == 'n') {
		start := c.pos
		if err := c.value(nil, depth); err != nil {
			return err
		}
		if c.mistyped == nil {
			if err := decodeSelf(t, c.data[start:c.pos]); err != nil {
				c.refuse("%v", err)
			}
		}
		return nil
	}
	start := c.pos
	switch ch := c.data[c.pos]; {
	case ch == '{' || ch == '[':
		if depth >= maxDepth {
			return fmt.Errorf("arrays and objects nested deeper than %d levels", maxDepth)
		}
		if ch == '[' {
			if t != nil && t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
				c.refuse("want %s, got an array", jsonType(t))
				t = nil
			}
			return c.array(t, depth+1)
		}
		if t != nil && t.Kind() != reflect.Struct && t.Kind() != reflect.Map {
			c.refuse("want %s, got an object", jsonType(t))
			t = nil
		}
		return c.object(t, depth+1)
	case ch == '"':
		if t != nil && t.Kind() != reflect.String && !isBytes(t) {
			c.refuse("want %s, got a string", jsonType(t))
			t = nil
		}
		if _, _, err := c.str(); err != nil {
			return err
		}
		if t != nil && isBytes(t) {
			if err := decodeSelf(t, c.data[start:c.pos]); err != nil {
				c.refuse("want a string in base64: %v", err)
			}
		}
		return nil
	case ch == '-' || ('0' <= ch && ch <= '9'):
		if err := c.number(); err != nil {
			return err
		}
		c.numberFits(t, c.data[start:c.pos])
		return nil
	case ch == 't' || ch == 'f':
		word := "true"
		if ch == 'f' {
			word = "false"
		}
		if t != nil && t.Kind() != reflect.Bool {
			c.refuse("want %s, got %s", jsonType(t), word)
		}
		return c.literal(word)
	case ch == 'n':
		if elem && t != nil && !pointer && t.Kind() != reflect.Slice && t.Kind() != reflect.Map {
			c.refuse("want %s, got null", jsonType(t))
		}
		return c.literal("null") // every field takes null, as nothing
	default:
		return c.syntax("looking for beginning of value")
	}
}

// refuse keeps, unless one was kept before, the refusal of the value being
// read, which its field does not take, naming the field by its path (none
// for the whole body).
func (c *checker) refuse(format string, args ...any) {
	if c.mistyped != nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if field := c.where(); field != "" {
		c.mistyped = fmt.Errorf("field %s: %s", api.Quote(field), msg)
		return
	}
	c.mistyped = errors.New(msg) // the whole body or message
}

// numberFits refuses the number lit where t does not take it: t is not a
// number, or lit is not a whole number in the range of t's integers, or is
// past a float's range, as encoding/json would refuse it.
func (c *checker) numberFits(t reflect.Type, lit []byte) {
	if t == nil || t == numberType {
		return
	}
	var err error
	switch k := t.Kind(); {
	case reflect.Int <= k && k <= reflect.Int64:
		if _, err = strconv.ParseInt(string(lit), 10, t.Bits()); errors.Is(err, strconv.ErrRange) {
			lo := -1 << (t.Bits() - 1)
			c.refuse("want an integer from %d to %d, got %s", lo, -(lo + 1), api.Clip(lit))
			return
		}
	case reflect.Uint <= k && k <= reflect.Uintptr:
		if _, err = strconv.ParseUint(string(lit), 10, t.Bits()); err != nil {
			c.refuse("want an integer from 0 to %d, got %s", uint64(1)<<t.Bits()-1, api.Clip(lit))
			return
		}
	case k == reflect.Float32 || k == reflect.Float64:
		if _, err = strconv.ParseFloat(string(lit), t.Bits()); err != nil {
			limit := math.MaxFloat64
			if k == reflect.Float32 {
				limit = math.MaxFloat32
			}
			c.refuse("want a number from %g to %g, got %s", -limit, limit, api.Clip(lit))
		}
		return
	default:
		c.refuse("want %s, got a number", jsonType(t))
		return
	}
	if err != nil {
		c.refuse("want an integer, got %s", api.Clip(lit))
	}
}

// jsonType names the JSON type a value of t is written as, for an error.
func jsonType(t reflect.Type) string {
	switch k := t.Kind(); {
	case k == reflect.Bool:
		return "true or false"
	case k == reflect.String, isBytes(t):
		return "a string"
	case reflect.Int <= k && k <= reflect.Uintptr:
		return "an integer"
	case k == reflect.Float32 || k == reflect.Float64:
		return "a number"
	case k == reflect.Slice || k == reflect.Array:
		return "an array"
	case k == reflect.Struct || k == reflect.Map:
		return "an object"
	}
	return t.String()
}

// isBytes reports whether t is a byte slice, which encoding/json reads from
// a base64 string.
func isBytes(t reflect.Type) bool {
	return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8
}

func (c *checker) array(t reflect.Type, depth int) error {
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	c.pos++ // [
	c.skipSpace()
	if c.pos < len(c.data) && c.data[c.pos] == ']' {
		c.pos++
		return nil
	}
	c.path = append(c.path, pathElem{})
	for i := 0; ; i++ {
		if err := c.element(); err != nil {
			return err
		}
		c.path[len(c.path)-1] = pathElem{index: i}
		c.elem = true
		if err := c.value(elem, depth); err != nil {
			return err
		}
		c.skipSpace()
		if c.pos >= len(c.data) {
			return errors.New("unexpected end of JSON input")
		}
		switch c.data[c.pos] {
		case ',':
			c.pos++
		case ']':
			c.pos++
			c.path = c.path[:len(c.path)-1]
			return nil
		default:
			return c.syntax("after array element")
		}
	}
}

func (c *checker) object(t reflect.Type, depth int) error {
	var kind reflect.Kind
	if t != nil {
		kind = t.Kind()
	}
	var fields map[string]reflect.Type
	var elem reflect.Type
	switch kind {
	case reflect.Struct:
		fields = jsonFields(t)
	case reflect.Map:
		elem = t.Elem()
	}
	c.pos++ // {
	c.skipSpace()
	if c.pos < len(c.data) && c.data[c.pos] == '}' {
		c.pos++
		return nil
	}
	var seen map[string]struct{}
	for {
		if err := c.element(); err != nil {
			return err
		}
		c.skipSpace()
		if c.pos >= len(c.data) {
			return errors.New("unexpected end of JSON input")
		}
		if c.data[c.pos] != '"' {
			return c.syntax("looking for beginning of object key string")
		}
		c.inKey = true
		raw, escaped, err := c.str()
		c.inKey = false
		if err != nil {
			return err
		}
		key := string(raw)
		if escaped {
			if err := json.Unmarshal(c.data[c.pos-len(raw)-2:c.pos], &key); err != nil {
				return err
			}
		}
		// name is the key's path, for errors.
		name := func() string {
			if p := c.where(); p != "" {
				return p + "." + key
			}
			return key
		}
		if _, dup := seen[key]; dup {
			if kind == reflect.Map {
				return fmt.Errorf("%s: duplicate key %s", unquoted(c.where()), api.Quote(key))
			}
			return fmt.Errorf("duplicate field %s", api.Quote(name()))
		}
		if seen == nil {
			seen = make(map[string]struct{})
		}
		seen[key] = struct{}{}
		ft := elem
		if fields != nil {
			var ok bool
			if ft, ok = fields[key]; !ok {
				return unknownField(name(), key, fields)
			}
		}
		c.skipSpace()
		if c.pos >= len(c.data) || c.data[c.pos] != ':' {
			return c.syntax("after object key")
		}
		c.pos++
		if depth == 1 && c.record {
			c.skipSpace()
			if c.pos < len(c.data) && c.data[c.pos] != 'n' {
				c.given = append(c.given, key)
			}
		}
		c.path = append(c.path, pathElem{key: key, isKey: true})
		if err := c.value(ft, depth); err != nil {
			return err
		}
		c.path = c.path[:len(c.path)-1]
		c.skipSpace()
		if c.pos >= len(c.data) {
			return errors.New("unexpected end of JSON input")
		}
		switch c.data[c.pos] {
		case ',':
			c.pos++
		case '}':
			c.pos++
			return nil
		default:
			return c.syntax("after object key:value pair")
		}
	}
}

// str reads a string at c.pos and returns its raw text between the quotes
// and whether it holds escapes. The text must be valid UTF-8 once
// unescaped: no invalid byte and no \u escape of a lone surrogate.
func (c *checker) str() (raw []byte, escaped bool, err error) {
	c.pos++ // "
	start := c.pos
	for c.pos < len(c.data) {
		ch := c.data[c.pos]
		switch {
		case ch == '"':
			raw = c.data[start:c.pos]
			c.pos++
			return raw, escaped, nil
		case ch == '\\':
			escaped = true
			if err := c.escape(); err != nil {
				return nil, false, err
			}
		case ch < 0x20:
			return nil, false, c.syntax("in string literal")
		case ch < utf8.RuneSelf:
			c.pos++
		default:
			r, n := utf8.DecodeRune(c.data[c.pos:])
			if r == utf8.RuneError && n == 1 {
				return nil, false, c.badText(fmt.Sprintf("byte %#x at offset %d", ch, c.pos))
			}
			c.pos += n
		}
	}
	return nil, false, errors.New("unexpected end of JSON input")
}

// escape reads one escape sequence at c.pos. A \u escape of a high
// surrogate must be followed by one of a low surrogate; a low one alone is
// refused.
func (c *checker) escape() error {
	at := c.pos
	if c.pos+1 >= len(c.data) {
		return errors.New("unexpected end of JSON input")
	}
	switch c.data[c.pos+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		c.pos += 2
		return nil
	case 'u':
	default:
		c.pos++
		return c.syntax("in string escape code")
	}
	u, err := c.hex4()
	if err != nil {
		return err
	}
	switch {
	case 0xDC00 <= u && u <= 0xDFFF:
		return c.badText(fmt.Sprintf("lone surrogate \\u%04x at offset %d", u, at))
	case 0xD800 <= u && u <= 0xDBFF:
		if c.pos+1 < len(c.data) && c.data[c.pos] == '\\' && c.data[c.pos+1] == 'u' {
			lo, err := c.hex4()
			if err != nil {
				return err
			}
			if 0xDC00 <= lo && lo <= 0xDFFF {
				return nil
			}
		}
		return c.badText(fmt.Sprintf("lone surrogate \\u%04x at offset %d", u, at))
	}
	return nil
}

// hex4 reads \uXXXX at c.pos and returns XXXX.
func (c *checker) hex4() (rune, error) {
	if c.pos+6 > len(c.data) {
		return 0, errors.New("unexpected end of JSON input")
	}
	var u rune
	for i := 2; i < 6; i++ {
		ch := c.data[c.pos+i]
		var d byte
		switch {
		case '0' <= ch && ch <= '9':
			d = ch - '0'
		case 'a' <= ch && ch <= 'f':
			d = ch - 'a' + 10
		case 'A' <= ch && ch <= 'F':
			d = ch - 'A' + 10
		default:
			c.pos += i
			return 0, c.syntax("in \\u hexadecimal character escape")
		}
		u = u<<4 | rune(d)
	}
	c.pos += 6
	return u, nil
}

// badText is the refusal of a string that is not valid UTF-8, naming the
// field it is in, or the object whose key it is.
func (c *checker) badText(what string) error {
	field := c.where()
	switch {
	case c.inKey && field == "":
		return fmt.Errorf("a key of the body is not valid UTF-8 (%s): JSON strings carry text", what)
	case c.inKey:
		return fmt.Errorf("a key of %s is not valid UTF-8 (%s): JSON strings carry text", api.Quote(field), what)
	case field == "input":
		return fmt.Errorf("field %s is not valid UTF-8 (%s): JSON strings carry text, send bytes in inputBase64", api.Quote(field), what)
	}
	return fmt.Errorf("field %s is not valid UTF-8 (%s): JSON strings carry text", api.Quote(field), what)
}

func (c *checker) number() error {
	d, p := c.data, c.pos
	if p < len(d) && d[p] == '-' {
		p++
	}
	digits := func() int {
		n := 0
		for p < len(d) && '0' <= d[p] && d[p] <= '9' {
			p++
			n++
		}
		return n
	}
	switch {
	case p < len(d) && d[p] == '0':
		p++
	case digits() == 0:
		c.pos = p
		return c.syntax("in numeric literal")
	}
	if p < len(d) && d[p] == '.' {
		p++
		if digits() == 0 {
			c.pos = p
			return c.syntax("after decimal point in numeric literal")
		}
	}
	if p < len(d) && (d[p] == 'e' || d[p] == 'E') {
		p++
		if p < len(d) && (d[p] == '+' || d[p] == '-') {
			p++
		}
		if digits() == 0 {
			c.pos = p
			return c.syntax("in exponent of numeric literal")
		}
	}
	c.pos = p
	return nil
}

func (c *checker) literal(word string) error {
	for i := 0; i < len(word); i++ {
		if c.pos >= len(c.data) {
			return errors.New("unexpected end of JSON input")
		}
		if c.data[c.pos] != word[i] {
			return c.syntax("in literal " + word)
		}
		c.pos++
	}
	return nil
}

// syntax words a syntax error at c.pos as encoding/json does.
func (c *checker) syntax(context string) error {
	if c.pos >= len(c.data) {
		return errors.New("unexpected end of JSON input")
	}
	ch := c.data[c.pos]
	s := strconv.QuoteRune(rune(ch))
	if ch >= utf8.RuneSelf {
		s = fmt.Sprintf("byte %#x", ch)
	}
	return fmt.Errorf("invalid character %s %s at offset %d", s, context, c.pos)
}

func (c *checker) skipSpace() {
	for c.pos < len(c.data) {
		switch c.data[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

// isSpace reports whether data is only JSON whitespace.
func isSpace(data []byte) bool {
	for _, ch := range data {
		if ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r' {
			return false
		}
	}
	return true
}

// unknownField words the refusal of key, with a hint when it differs from a
// field only in case.
func unknownField(name, key string, fields map[string]reflect.Type) error {
	for f := range fields {
		if strings.EqualFold(f, key) {
			return fmt.Errorf("unknown field %s: names are case-sensitive, did you mean %q?", api.Quote(name), f)
		}
	}
	return fmt.Errorf("unknown field %s", api.Quote(name))
}

// fieldCache holds jsonFields by type.
var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// jsonFields returns the JSON names of the struct type t's fields, with
// their types, as encoding/json sees them: the tag's name or the field's,
// "-" left out, and the fields of an untagged embedded struct promoted
// unless a shallower field has the name.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := make(map[string]reflect.Type)
	var embedded []reflect.Type
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			embedded = append(embedded, ft)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	for _, et := range embedded {
		for name, ft := range jsonFields(et) {
			if _, ok := m[name]; !ok {
				m[name] = ft
			}
		}
	}
	fieldCache.Store(t, m)
	return m
}

// unquoted is a field's path for a message as api.Quote clips it, without
// the quotes: a key in it may be megabytes long.
func unquoted(path string) string {
	q := api.Quote(path)
	if s, err := strconv.Unquote(q); err == nil {
		return s
	}
	s, _ := strconv.Unquote(strings.TrimSuffix(q, "..."))
	return s + "..."
}
