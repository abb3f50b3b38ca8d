package reducer

import (
	"bytes"
	"encoding/json"
)

// Marshal encodes v as serde_json does: no HTML escaping of <, > and &,
// and U+2028 and U+2029 written as themselves, so that what the daemon
// writes, stored events and replies alike, is byte-for-byte what the
// seed's types write.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return unescapeSeparators(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// unescapeSeparators turns the \u2028 and \u2029 escapes that
// encoding/json always writes back into the characters. An escape is one
// only when an even number of backslashes precedes it.
func unescapeSeparators(b []byte) []byte {
	if !bytes.Contains(b, []byte(`\u202`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+1 < len(b) {
			if b[i+1] == 'u' && i+5 < len(b) && string(b[i+2:i+5]) == "202" && (b[i+5] == '8' || b[i+5] == '9') {
				out = append(out, []byte(string(rune(0x2020+int(b[i+5]-'0'))))...)
				i += 5
				continue
			}
			out = append(out, b[i], b[i+1])
			i++
			continue
		}
		out = append(out, b[i])
	}
	return out
}
