package server

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/conchsh/conch/api"
)

// wideBody has a field of each kind the checker tells apart, for
// TestStrictValueTypes.
type wideBody struct {
	S   string            `json:"s"`
	B   bool              `json:"b"`
	I8  int8              `json:"i8"`
	U   uint              `json:"u"`
	F32 float32           `json:"f32"`
	M   api.Millis        `json:"m"`
	PM  *api.Millis       `json:"pm"`
	T   api.Time          `json:"t"`
	PT  *api.Time         `json:"pt"`
	N   json.Number       `json:"n"`
	Raw []byte            `json:"raw"`
	Arr [2]int            `json:"arr"`
	Any any               `json:"any"`
	Env map[string]string `json:"env"`
	L   []*api.Limits     `json:"l"`
}

// TestStrictValueTypes: unmarshalStrict refuses a value its field's type
// does not take naming the field by its path, and takes, as the same
// values, what encoding/json takes, nulls and numbers given to a string
// type included.
func TestStrictValueTypes(t *testing.T) {
	for body, want := range map[string]string{
		`{"s":1}`:                     `field "s": want a string, got a number`,
		`{"b":"true"}`:                `field "b": want true or false, got a string`,
		`{"i8":128}`:                  `field "i8": want an integer from -128 to 127, got 128`,
		`{"i8":1e1}`:                  `field "i8": want an integer, got 1e1`,
		`{"u":-1}`:                    `field "u": want an integer from 0 to 18446744073709551615, got -1`,
		`{"f32":1e39}`:                `field "f32": want a number from -3.4028234663852886e+38 to 3.4028234663852886e+38, got 1e39`,
		`{"m":"1"}`:                   `field "m": want a number of milliseconds, got a string`,
		`{"pm":-5}`:                   `field "pm": want a number of milliseconds from 0 to 9223372036854, got -5`,
		`{"t":null}`:                  `field "t": parsing time`,
		`{"t":"yesterday"}`:           `field "t": parsing time "yesterday"`,
		`{"raw":"!!"}`:                `field "raw": want a string in base64`,
		`{"arr":[1,"2"]}`:             `field "arr[1]": want an integer, got a string`,
		`{"env":{"A":"1","B":[]}}`:    `field "env.B": want a string, got an array`,
		`{"l":[null,{"pids":true}]}`:  `field "l[1].pids": want an integer, got true`,
		`{"l":[{"memoryBytes":"1"}]}`: `field "l[0].memoryBytes": want an integer, got a string`,
		`true`:                        `want an object, got true`,
		// The first value of the wrong type is the one named; a body also
		// malformed, or with an unknown key, is refused for that, as
		// encoding/json refuses its syntax before its types.
		`{"s":1,"b":"x"}`:                `field "s": want a string, got a number`,
		`{"s":1,"zz":2}`:                 `unknown field "zz"`,
		`{"s":[1,{"zz":2}],"zz":2}`:      `unknown field "zz"`,
		`{"m":"1","s":1,`:                `unexpected end of JSON input`,
		`{"s":1} 2`:                      `data after the JSON value`,
		`{"env":[[[[[[[[[[[]]]]]]]]]]]}`: `field "env": want an object, got an array`,
	} {
		var v wideBody
		err := unmarshalStrict([]byte(body), &v)
		require.Error(t, err, body)
		require.Contains(t, err.Error(), want, body)
		require.Error(t, json.Unmarshal([]byte(body), new(wideBody)), "encoding/json refuses %s too", body)
	}
	for _, body := range []string{
		`null`,
		`{"s":null,"b":null,"i8":null,"u":null,"f32":null,"m":null,"pm":null,"pt":null,"n":null,"raw":null,"arr":null,"any":null,"env":null,"l":null}`,
		`{"s":"x","b":false,"i8":-128,"u":18446744073709551615,"f32":-0.5e-3,"m":1.5,"pm":0,"t":"2026-01-02T03:04:05Z","pt":"2026-01-02T03:04:05.5+01:00"}`,
		`{"n":12.5e3,"raw":"aGk=","arr":[1,2,3],"any":{"x":[true,null,"s",1]},"env":{"A":null},"l":[null,{"pids":5}]}`,
		`{"n":"7","raw":[104,105],"arr":[]}`,
	} {
		var got, want wideBody
		require.NoError(t, unmarshalStrict([]byte(body), &got), body)
		require.NoError(t, json.Unmarshal([]byte(body), &want), body)
		require.True(t, reflect.DeepEqual(want, got), "%s: %+v, want %+v", body, got, want)
	}
}
