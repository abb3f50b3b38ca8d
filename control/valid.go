package control

// validJSON reports whether b is exactly one JSON value (RFC 8259) with
// optional white space around it: what encoding/json's Valid reports,
// including its nesting limit, which FuzzValidJSON holds it to. It is on
// every request's path and walks the bytes in tight loops, where Valid
// runs its scanner's state function per byte (a third of the time of
// decoding a request, before).
func validJSON(b []byte) bool {
	var stack [64]byte // '{' or '[' of each open container
	open := stack[:0]
	i := skipSpace(b, 0)
	for {
		// A value starts at i.
		if i >= len(b) {
			return false
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(open) == maxNesting {
				return false
			}
			open = append(open, c)
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == closer(c) {
				open = open[:len(open)-1]
				i++
				break
			}
			if c == '{' {
				if i = validKey(b, i); i < 0 {
					return false
				}
			}
			continue
		case c == '"':
			if i = validString(b, i); i < 0 {
				return false
			}
		case c == '-' || (c >= '0' && c <= '9'):
			if i = validNumber(b, i); i < 0 {
				return false
			}
		case c == 't':
			if i = literal(b, i, "true"); i < 0 {
				return false
			}
		case c == 'f':
			if i = literal(b, i, "false"); i < 0 {
				return false
			}
		case c == 'n':
			if i = literal(b, i, "null"); i < 0 {
				return false
			}
		default:
			return false
		}
		// A value ended just before i: close containers, or go on to
		// the next element or member.
		for {
			i = skipSpace(b, i)
			if len(open) == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			top := open[len(open)-1]
			if b[i] == closer(top) {
				open = open[:len(open)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return false
			}
			i = skipSpace(b, i+1)
			if top == '{' {
				if i = validKey(b, i); i < 0 {
					return false
				}
			}
			break
		}
	}
}

// maxNesting is encoding/json's limit of nested objects and arrays.
const maxNesting = 10000

func closer(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}

// validKey checks a member's key and its colon at i, and returns the
// index of its value (after white space), or -1.
func validKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = validString(b, i); i < 0 {
		return -1
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipSpace(b, i+1)
}

// validString checks the string literal at i and returns the index just
// past it, or -1. Any byte from 0x20 up is allowed in it (Valid does not
// check UTF-8), except the quote and the backslash, which starts one of
// JSON's escapes.
func validString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) {
					return -1
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// validNumber checks the number at i and returns the index just past it,
// or -1: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func validNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if j := digits(b, i+1); j > i+1 {
			i = j
		} else {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if j := digits(b, i); j > i {
			i = j
		} else {
			return -1
		}
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// literal checks that word (true, false or null) is at i and returns the
// index just past it, or -1.
func literal(b []byte, i int, word string) int {
	if len(b)-i < len(word) || string(b[i:i+len(word)]) != word {
		return -1
	}
	return i + len(word)
}
