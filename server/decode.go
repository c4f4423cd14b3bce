package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	_, err := readJSON(r, v)
	return err
}

// readJSON is decodeJSON that also returns the body it read (nil when
// empty or blank).
func readJSON(r *http.Request, v any) ([]byte, error) {
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
	if err := unmarshalStrict(data, v); err != nil {
		return nil, badRequest("malformed JSON body: %v", err)
	}
	return data, nil
}

// readBody reads the whole body. A body with a Content-Length within the
// route's limit is read into one buffer of its size, so that reading a
// large body costs the body and no more; that buffer counts against the
// bodies' budget from the start, so that Content-Lengths alone cannot
// make the daemon hold more than the budget (100 connections that
// declared 16 MiB each took 1.6 GB of heap).
func readBody(r *http.Request) ([]byte, error) {
	b, _ := r.Body.(*boundedBody)
	size := int64(512)
	if r.ContentLength > 0 {
		size = r.ContentLength
		if b != nil && size > b.limit {
			size = b.limit
		}
	}
	if b != nil {
		b.sized = true // its buffer counts, not the bytes read
	}
	if err := b.hold(size + 1); err != nil {
		return nil, err
	}
	buf := make([]byte, 0, size+1) // +1: room to read the end
	for {
		if len(buf) == cap(buf) {
			had := cap(buf)
			buf = append(buf, 0)[:len(buf)]
			if err := b.hold(int64(cap(buf) - had)); err != nil {
				return nil, err
			}
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

// boundedBody is a request body under its route's limit; a read past the
// limit fails with the API's 413, which names the limit and where it comes
// from. What it read counts against the bytes of all the bodies being
// read, which held refuses past its limit with 429; the handler's wrapper
// gives them back once the request is answered.
type boundedBody struct {
	io.ReadCloser // an http.MaxBytesReader of limit
	limit         int64
	flag          string      // the flag that sets limit, if one does
	held          *bodyBudget // nil: not counted
	taken         int64       // what this body holds of held
	sized         bool        // held counts readBody's buffer, not the bytes read
}

// bodyBudget bounds the bytes of the request bodies being read and handled
// at once: each is bounded by --body-limit, but 40 at once took the daemon
// to 824 MB, at its memory limit.
type bodyBudget struct {
	used  atomic.Int64
	limit int64
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
			"the request bodies being read at once are over %d bytes (twice --body-limit): send this one again once others are answered",
			b.held.limit), nil}
	}
	b.taken += n
	return nil
}

func (b *boundedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && !b.sized {
		if herr := b.hold(int64(n)); herr != nil {
			return 0, herr
		}
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		msg := fmt.Sprintf("request body over %d bytes, the most this route takes", b.limit)
		if b.flag != "" {
			msg = fmt.Sprintf("request body over %d bytes (%s)", b.limit, b.flag)
		}
		err = &Error{http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge, msg, err}
	}
	return n, err
}

// unmarshalStrict decodes data into v as encoding/json does, but refuses
// what encoding/json lets through: a key that matches a field only when case
// is ignored, a key given twice in one object (encoding/json keeps the
// last), and strings that are not valid UTF-8 (encoding/json makes each bad
// byte U+FFFD). A proxy that validates bodies before they reach the daemon
// must see the command that runs: {"cmd":"true","CMD":"rm -rf ~"} is
// refused, not run. Nesting is bounded by maxDepth before encoding/json
// sees the body.
func unmarshalStrict(data []byte, v any) error {
	c := checker{data: data}
	if err := c.value(reflect.TypeOf(v), 0); err != nil {
		return err
	}
	c.skipSpace()
	if c.pos < len(c.data) {
		return errors.New("data after the JSON value")
	}
	// Every key was checked against the fields above: unknown fields
	// cannot reach Unmarshal, which reads data in place.
	return json.Unmarshal(data, v)
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checker reads one JSON value in one pass, iteratively within each array
// and object and recursively at most maxDepth deep, checking the syntax,
// the depth, that every string is valid UTF-8, and the keys of objects
// against the Go type the value will be decoded into: a struct's keys must
// be exactly its fields' JSON names, and no object may repeat a key (a
// map's keys are data, compared exactly). A nil type (an interface, or a
// type that decodes itself) has its duplicates checked only. Type errors
// are left to encoding/json, which words them well. path is where the
// checker is, formatted only for an error.
type checker struct {
	data  []byte
	pos   int
	path  []pathElem
	inKey bool // reading an object's key, not a value
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
	c.skipSpace()
	if c.pos >= len(c.data) {
		return errors.New("unexpected end of JSON input")
	}
	switch ch := c.data[c.pos]; {
	case ch == '{' || ch == '[':
		if depth >= maxDepth {
			return fmt.Errorf("arrays and objects nested deeper than %d levels", maxDepth)
		}
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t != nil && (t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)) {
			t = nil
		}
		if ch == '[' {
			return c.array(t, depth+1)
		}
		return c.object(t, depth+1)
	case ch == '"':
		_, _, err := c.str()
		return err
	case ch == '-' || ('0' <= ch && ch <= '9'):
		return c.number()
	case ch == 't':
		return c.literal("true")
	case ch == 'f':
		return c.literal("false")
	case ch == 'n':
		return c.literal("null")
	default:
		return c.syntax("looking for beginning of value")
	}
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
		c.path[len(c.path)-1] = pathElem{index: i}
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
				return fmt.Errorf("%s: duplicate key %q", c.where(), key)
			}
			return fmt.Errorf("duplicate field %q", name())
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
		return fmt.Errorf("a key of %q is not valid UTF-8 (%s): JSON strings carry text", field, what)
	case field == "input":
		return fmt.Errorf("field %q is not valid UTF-8 (%s): JSON strings carry text, send bytes in inputBase64", field, what)
	}
	return fmt.Errorf("field %q is not valid UTF-8 (%s): JSON strings carry text", field, what)
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
			return fmt.Errorf("unknown field %q: names are case-sensitive, did you mean %q?", name, f)
		}
	}
	return fmt.Errorf("unknown field %q", name)
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
