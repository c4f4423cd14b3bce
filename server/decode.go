package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// decodeJSON reads the request body into v. An empty body leaves v as it is;
// malformed JSON, unknown or misspelt fields, duplicate keys and trailing
// data are invalid_argument, a body over the limit payload_too_large.
func decodeJSON(r *http.Request, v any) error {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return err
		}
		return badRequest("read body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := unmarshalStrict(data, v); err != nil {
		return badRequest("malformed JSON body: %v", err)
	}
	return nil
}

// unmarshalStrict decodes data into v as encoding/json does, but refuses
// what encoding/json lets through: a key that matches a field only when case
// is ignored, and a key given twice in one object (encoding/json keeps the
// last). A proxy that validates bodies before they reach the daemon must see
// the command that runs: {"cmd":"true","CMD":"rm -rf ~"} is refused, not run.
func unmarshalStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := checkKeys(dec, reflect.TypeOf(v), ""); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON value")
	}
	strict := json.NewDecoder(bytes.NewReader(data))
	strict.DisallowUnknownFields()
	return strict.Decode(v)
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checkKeys reads one JSON value from dec and checks the keys of its objects
// against t, the Go type it will be decoded into: a struct's keys must be
// exactly its fields' JSON names, and no object may repeat a key (a map's
// keys are data, compared exactly). A nil t (an interface, or a type that
// decodes itself) has its duplicates checked only. Syntax and type errors
// are left to the decoding that follows, which words them better. path names
// the value in errors.
func checkKeys(dec *json.Decoder, t reflect.Type, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType)) {
		t = nil
	}
	var kind reflect.Kind
	if t != nil {
		kind = t.Kind()
	}
	switch delim {
	case '[':
		var elem reflect.Type
		if kind == reflect.Slice || kind == reflect.Array {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := checkKeys(dec, elem, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case '{':
		var fields map[string]reflect.Type
		var elem reflect.Type
		switch kind {
		case reflect.Struct:
			fields = jsonFields(t)
		case reflect.Map:
			elem = t.Elem()
		}
		seen := make(map[string]bool)
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := tok.(string)
			name := key
			if path != "" {
				name = path + "." + key
			}
			if seen[key] {
				if kind == reflect.Map {
					return fmt.Errorf("%s: duplicate key %q", path, key)
				}
				return fmt.Errorf("duplicate field %q", name)
			}
			seen[key] = true
			ft := elem
			if fields != nil {
				if ft, ok = fields[key]; !ok {
					return unknownField(name, key, fields)
				}
			}
			if err := checkKeys(dec, ft, name); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
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
