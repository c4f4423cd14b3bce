package client

import (
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// notText returns where in v, a request's body, a string is not UTF-8 (a
// field's JSON name, with indexes and keys), or "" when none is. Such a
// string would go out with U+FFFD in place of its bytes: encoding/json
// replaces them, where the daemon refuses text that is not UTF-8 rather
// than run a command other than the one asked for. Byte slices go as
// base64 and are not looked at.
func notText(v reflect.Value, at string) string {
	switch v.Kind() {
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return at
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return notText(v.Elem(), at)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range v.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case name == "-":
				continue
			case f.Anonymous && name == "":
				name = at // an embedded struct's fields are its parent's
			case name == "":
				name = join(at, f.Name)
			default:
				name = join(at, name)
			}
			if p := notText(v.Field(i), name); p != "" {
				return p
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return ""
		}
		for i := range v.Len() {
			if p := notText(v.Index(i), fmt.Sprintf("%s[%d]", at, i)); p != "" {
				return p
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			k := fmt.Sprint(it.Key().Interface())
			if !utf8.ValidString(k) {
				return join(at, fmt.Sprintf("%q", k))
			}
			if p := notText(it.Value(), join(at, k)); p != "" {
				return p
			}
		}
	}
	return ""
}

func join(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}
