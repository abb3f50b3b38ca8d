package control

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"scv/control/api"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// member is one key and value of a JSON object, in input order. Both
// alias the bytes they were split from (see unquoteKey), which must not
// change while the member is in use.
type member struct {
	key string
	raw json.RawMessage
}

// objectMembers splits a JSON object into its members, in order. It fails
// when raw is not one JSON object. It walks the bytes once, without the
// allocations of encoding/json's token API: it is on every request's path.
func objectMembers(raw []byte) ([]member, error) {
	if !validJSON(raw) {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		return nil, errors.New("trailing characters")
	}
	return splitMembers(nil, raw)
}

// splitMembers is objectMembers for raw that validJSON accepted;
// it appends the members to ms (a buffer of the caller's, or nil).
func splitMembers(ms []member, raw []byte) ([]member, error) {
	i := skipSpace(raw, 0)
	if raw[i] != '{' {
		return nil, fmt.Errorf("invalid type: %s, expected a map", describe(raw))
	}
	i = skipSpace(raw, i+1)
	for raw[i] != '}' {
		end := skipString(raw, i)
		key, err := unquoteKey(raw[i:end])
		if err != nil {
			return nil, err
		}
		i = skipSpace(raw, end)
		i = skipSpace(raw, i+1) // the colon
		end = skipValue(raw, i)
		ms = append(ms, member{key: key, raw: raw[i:end]})
		i = skipSpace(raw, end)
		if raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return ms, nil
}

// arrayElements splits a JSON array into its elements, or into its first
// max+1 when max is not negative (a batch's: more is over the limit);
// raw must be valid JSON.
func arrayElements(raw []byte, max int) []json.RawMessage {
	var out []json.RawMessage
	i := skipSpace(raw, 1)
	for raw[i] != ']' && (max < 0 || len(out) <= max) {
		end := skipValue(raw, i)
		out = append(out, raw[i:end])
		i = skipSpace(raw, end)
		if raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return out
}

// The skip functions walk JSON that validJSON accepted, so they need no
// error paths: each returns the index just past what starts at i.

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func skipString(b []byte, i int) int {
	for {
		// The next quote ends the string unless an odd number of
		// backslashes escapes it.
		j := i + 1 + bytes.IndexByte(b[i+1:], '"')
		k := j
		for b[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j + 1
		}
		i = j
	}
}

func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && !strings.ContainsRune(",}] \t\n\r", rune(b[i])) {
		i++
	}
	return i
}

// unquote decodes a JSON string literal, without encoding/json when it
// holds no escape.
func unquote(lit []byte) (string, error) {
	inner := lit[1 : len(lit)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner), nil
	}
	var s string
	err := json.Unmarshal(lit, &s)
	return s, err
}

// unquoteKey is unquote for an object's key, which is only compared and
// quoted in errors, never kept: without an escape it is the bytes of raw
// themselves, not a copy (one allocation less per key of every request).
func unquoteKey(lit []byte) (string, error) {
	inner := lit[1 : len(lit)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return unsafe.String(unsafe.SliceData(inner), len(inner)), nil
	}
	return unquote(lit)
}

// maxDepth is serde_json's recursion limit: it refuses a value nested 128
// levels deep (the params object counting as the first), also inside a
// field it would then ignore.
const maxDepth = 128

// checkDepth refuses raw (valid JSON) nested maxDepth levels or deeper.
func checkDepth(raw []byte) error {
	depth := 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			i = skipString(raw, i) - 1
		case '{', '[':
			if depth++; depth >= maxDepth {
				return errors.New("recursion limit exceeded")
			}
		case '}', ']':
			depth--
		}
	}
	return nil
}

// checkNumbers refuses numbers outside float64's range anywhere in raw
// (valid JSON), as serde_json does ("number out of range").
func checkNumbers(raw []byte) error {
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			i = skipString(raw, i) - 1
		case c == '-' || (c >= '0' && c <= '9'):
			end := skipValue(raw, i)
			lit := raw[i:end]
			if bytes.ContainsAny(lit, "eE") || len(lit) > 300 {
				if f, err := strconv.ParseFloat(string(lit), 64); err != nil && math.IsInf(f, 0) {
					return errors.New("number out of range")
				}
			}
			i = end - 1
		}
	}
	return nil
}

// DecodeCommand parses the params of a daemon.control request as serde
// parses the seed's DaemonCommand, refusing what serde refuses: a missing
// or unknown action, a missing required field, a duplicate field, a wrong
// type, a negative, fractional or out-of-range integer, an unknown enum
// value. Unknown fields are ignored. The error names the field.
func DecodeCommand(raw []byte) (api.Command, error) {
	if !utf8.Valid(raw) {
		return nil, errors.New("invalid unicode code point")
	}
	if !validJSON(raw) {
		_, err := objectMembers(raw) // says what is wrong
		return nil, fmt.Errorf("%w, expected internally tagged enum DaemonCommand", trimExpected(err))
	}
	return decodeValid(raw)
}

// decodeValid is DecodeCommand for raw that is valid UTF-8 and JSON: the
// server checks the whole request line once.
func decodeValid(raw []byte) (api.Command, error) {
	if err := checkDepth(raw); err != nil {
		return nil, err
	}
	cmd, err := decodeCommand(raw)
	if err != nil {
		return nil, err
	}
	// serde parses the whole object before it picks the variant, so it
	// also refuses bad text in the fields it then ignores.
	if err := checkSurrogates(raw); err != nil {
		return nil, err
	}
	if err := checkNumbers(raw); err != nil {
		return nil, err
	}
	return cmd, nil
}

func decodeCommand(raw []byte) (api.Command, error) {
	var buf [8]member
	ms, err := splitMembers(buf[:0], raw)
	if err != nil {
		return nil, fmt.Errorf("%w, expected internally tagged enum DaemonCommand", trimExpected(err))
	}
	var tag *member
	for i := range ms {
		if ms[i].key == "action" {
			if tag != nil {
				return nil, errors.New("duplicate field `action`")
			}
			tag = &ms[i]
		}
	}
	if tag == nil {
		return nil, errors.New("missing field `action`")
	}
	var action string
	if err := decodeString(tag.raw, &action); err != nil {
		return nil, fmt.Errorf("field `action`: %w", err)
	}
	if t, ok := commandTypes()[action]; ok {
		v := reflect.New(t.typ).Elem()
		if err := decodeStruct(ms, t.fields, v); err != nil {
			return nil, fmt.Errorf("%s: %w", action, err)
		}
		return v.Interface().(api.Command), nil
	}
	actions := api.Commands()
	names := make([]string, len(actions))
	for i, a := range actions {
		names[i] = "`" + a.Action() + "`"
	}
	return nil, fmt.Errorf("field `action`: unknown variant `%s`, expected one of %s", action, strings.Join(names, ", "))
}

func trimExpected(err error) error {
	msg := err.Error()
	if i := strings.Index(msg, ", expected"); i >= 0 {
		msg = msg[:i]
	}
	return errors.New(msg)
}

// commandType is a command's struct type and what decodeStruct needs of
// its fields, read from their tags once.
type commandType struct {
	typ    reflect.Type
	fields []commandField
}

// commandField is one field of a command: its JSON name, and whether it
// may be missing (a pointer, or serde's default).
type commandField struct {
	name     string
	optional bool
}

// commandTypes maps each action to its command's type.
var commandTypes = sync.OnceValue(func() map[string]commandType {
	actions := api.Commands()
	m := make(map[string]commandType, len(actions))
	for _, proto := range actions {
		m[proto.Action()] = structType(reflect.TypeOf(proto))
	}
	return m
})

// structType reads the fields of struct type t from their tags.
func structType(t reflect.Type) commandType {
	ct := commandType{typ: t, fields: make([]commandField, t.NumField())}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		ct.fields[i] = commandField{name: name,
			optional: f.Type.Kind() == reflect.Pointer || f.Tag.Get("serde") == "default"}
	}
	return ct
}

// structTypes caches structType for the structs inside commands (a
// plan's tasks).
var structTypes sync.Map // reflect.Type -> commandType

// decodeStruct fills the fields of v, described by fields, from ms.
func decodeStruct(ms []member, fields []commandField, v reflect.Value) error {
	for i, f := range fields {
		var found *member
		for j := range ms {
			if ms[j].key == f.name {
				if found != nil {
					return fmt.Errorf("duplicate field `%s`", f.name)
				}
				found = &ms[j]
			}
		}
		if found == nil {
			if f.optional {
				continue
			}
			return fmt.Errorf("missing field `%s`", f.name)
		}
		if err := decodeValue(found.raw, v.Field(i)); err != nil {
			return fmt.Errorf("field `%s`: %w", f.name, err)
		}
	}
	return nil
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// decodeValue decodes one JSON value strictly into v.
func decodeValue(raw json.RawMessage, v reflect.Value) error {
	if v.Kind() == reflect.Pointer {
		if string(raw) == "null" {
			v.SetZero()
			return nil
		}
		p := reflect.New(v.Type().Elem())
		if err := decodeValue(raw, p.Elem()); err != nil {
			return err
		}
		v.Set(p)
		return nil
	}
	if reflect.PointerTo(v.Type()).Implements(textUnmarshaler) {
		var s string
		if err := decodeString(raw, &s); err != nil {
			return err
		}
		return v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s))
	}
	switch v.Kind() {
	case reflect.String:
		var s string
		if err := decodeString(raw, &s); err != nil {
			return err
		}
		v.SetString(s)
	case reflect.Bool:
		switch string(raw) {
		case "true", "false":
			v.SetBool(string(raw) == "true")
		default:
			return fmt.Errorf("invalid type: %s, expected a boolean", describe(raw))
		}
	case reflect.Uint32, reflect.Uint64:
		n, err := decodeUint(raw, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetUint(n)
	case reflect.Struct:
		ct, ok := structTypes.Load(v.Type())
		if !ok {
			ct, _ = structTypes.LoadOrStore(v.Type(), structType(v.Type()))
		}
		if len(raw) == 0 || raw[0] != '{' {
			return fmt.Errorf("invalid type: %s, expected struct %s", describe(raw), v.Type().Name())
		}
		ms, err := splitMembers(nil, raw)
		if err != nil {
			return err
		}
		return decodeStruct(ms, ct.(commandType).fields, v)
	case reflect.Slice:
		if len(raw) == 0 || raw[0] != '[' {
			return fmt.Errorf("invalid type: %s, expected a sequence", describe(raw))
		}
		elems := arrayElements(raw, -1)
		s := reflect.MakeSlice(v.Type(), len(elems), len(elems))
		for i, e := range elems {
			if err := decodeValue(e, s.Index(i)); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
		}
		v.Set(s)
	default:
		panic(fmt.Sprintf("control: no decoder for %s", v.Type()))
	}
	return nil
}

func decodeString(raw json.RawMessage, s *string) error {
	if len(raw) == 0 || raw[0] != '"' {
		return fmt.Errorf("invalid type: %s, expected a string", describe(raw))
	}
	if err := checkSurrogates(raw); err != nil {
		return err
	}
	v, err := unquote(raw)
	*s = v
	return err
}

// decodeUint accepts a JSON integer in [0, 2^bits), as serde's u32 and
// u64 do: no sign, no fraction, no exponent.
func decodeUint(raw json.RawMessage, bits int) (uint64, error) {
	s := string(raw)
	if len(s) == 0 || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return 0, fmt.Errorf("invalid type: %s, expected u%d", describe(raw), bits)
	}
	if strings.ContainsAny(s, ".eE") {
		return 0, fmt.Errorf("invalid type: floating point `%s`, expected u%d", s, bits)
	}
	if s == "-0" {
		// serde_json reads -0 as a float.
		return 0, fmt.Errorf("invalid type: floating point `-0`, expected u%d", bits)
	}
	if s[0] == '-' {
		return 0, fmt.Errorf("invalid value: integer `%s`, expected u%d", s, bits)
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid type: floating point `%s`, expected u%d", s, bits)
	}
	if bits < 64 && n >= 1<<bits {
		return 0, fmt.Errorf("invalid value: integer `%s`, expected u%d", s, bits)
	}
	return n, nil
}

// checkSurrogates refuses \u escapes of unpaired UTF-16 surrogates, which
// serde_json refuses and encoding/json would silently replace.
func checkSurrogates(raw []byte) error {
	for i := 0; i+5 < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // skip the escaped character
			continue
		}
		c, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		if err != nil {
			return nil // encoding/json reports the bad escape
		}
		switch {
		case c >= 0xD800 && c < 0xDC00:
			if i+11 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
				if lo, err := strconv.ParseUint(string(raw[i+8:i+12]), 16, 16); err == nil && lo >= 0xDC00 && lo < 0xE000 {
					i += 11
					continue
				}
			}
			return errors.New("lone leading surrogate in hex escape")
		case c >= 0xDC00 && c < 0xE000:
			return errors.New("lone trailing surrogate in hex escape")
		}
		i += 5
	}
	return nil
}

// describe names a JSON value the way serde's errors do.
func describe(raw []byte) string {
	s := string(bytes.TrimSpace(raw))
	switch {
	case s == "":
		return "nothing"
	case s == "null":
		return "null"
	case s == "true" || s == "false":
		return "boolean `" + s + "`"
	case s[0] == '"':
		var str string
		_ = json.Unmarshal([]byte(s), &str)
		return fmt.Sprintf("string %q", str)
	case s[0] == '[':
		return "sequence"
	case s[0] == '{':
		return "map"
	case strings.ContainsAny(s, ".eE"):
		return "floating point `" + s + "`"
	}
	return "integer `" + s + "`"
}
