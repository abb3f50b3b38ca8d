package control

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestValidJSON holds validJSON to encoding/json's Valid on the corners
// of the grammar; FuzzDecodeCommand compares the two on every input it
// makes.
func TestValidJSON(t *testing.T) {
	cases := []string{
		``, ` `, `{}`, `[]`, ` { } `, `{"a":1}`, `{"a":1,}`, `{,}`, `[1,]`, `[,1]`, `[1 2]`,
		`{"a" 1}`, `{"a":}`, `{a:1}`, `{"a":1 "b":2}`, `{"a":1}}`, `[[]]]`, `[[]`, `{"a":[1,{"b":null}]}`,
		`"`, `""`, `"a`, `"\"`, `"\\"`, `"\/\b\f\n\r\t"`, `"\x"`, `"\u12"`, `"\u12g4"`, `"\u00e9"`, `"\uD800"`,
		"\"\x1f\"", "\"\x7f\"", "\"\xff\xfe\"", "\"é\"", "\t\r\n1\n", "\v1", "\u00a01",
		`0`, `-0`, `01`, `-`, `-a`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1e-5`, `1E5`, `1.5e3`, `-01`, `0x1`, `1.e3`,
		`true`, `tru`, `truex`, `false`, `fals`, `null`, `nul`, `nulll`, `[true,false,null]`, `NaN`, `Infinity`,
		`1 1`, `{} {}`, `[] x`, `"a" "b"`,
	}
	for _, c := range cases {
		assert.Equal(t, json.Valid([]byte(c)), validJSON([]byte(c)), "%q", c)
	}
	// The nesting limit, on both sides of it.
	for _, n := range []int{maxNesting - 1, maxNesting, maxNesting + 1} {
		for _, pair := range []string{"[]", `{"a":}`} {
			var s string
			if pair == "[]" {
				s = strings.Repeat("[", n) + strings.Repeat("]", n)
			} else {
				s = strings.Repeat(`{"a":`, n-1) + `{}` + strings.Repeat("}", n-1)
			}
			assert.Equal(t, json.Valid([]byte(s)), validJSON([]byte(s)), "%d levels of %s", n, pair)
		}
	}
}
