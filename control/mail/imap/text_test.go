package imap

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"scv/control/mail"
)

// text is readText of a mail given whole (header, blank line, body).
func text(raw string) string {
	header, body, _ := strings.Cut(raw, "\r\n\r\n")
	return readText(readHeader([]byte(header+"\r\n\r\n")).Header, []byte(body))
}

func TestReadText(t *testing.T) {
	for name, tc := range map[string]struct{ raw, want string }{
		"no content type": {"Subject: x\r\n\r\nplain\r\nlines\r\n", "plain\nlines"},
		"base64": {"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
			"w6l0w6kK\r\n", "été"},
		"an unknown charset is left as it is": {"Content-Type: text/plain; charset=x-unknown\r\n\r\nbytes \xff as they are\r\n",
			"bytes \uFFFD as they are"},
		"an unknown transfer encoding too": {"Content-Transfer-Encoding: x-rot13\r\n\r\nfbzr\r\n", "fbzr"},
		"mixed, then alternative, HTML first": {"Content-Type: multipart/mixed; boundary=o\r\n\r\n" +
			"--o\r\nContent-Type: multipart/alternative; boundary=i\r\n\r\n" +
			"--i\r\nContent-Type: text/html\r\n\r\n<p>html</p>\r\n" +
			"--i\r\nContent-Type: text/plain\r\n\r\nplain\r\n--i--\r\n" +
			"--o\r\nContent-Type: application/pdf\r\n\r\n%PDF\r\n--o--\r\n", "plain"},
		"an attachment alone has no text": {"Content-Type: multipart/mixed; boundary=o\r\n\r\n" +
			"--o\r\nContent-Type: text/plain\r\nContent-Disposition: attachment\r\n\r\nnot this\r\n--o--\r\n", ""},
		"an image has none": {"Content-Type: image/png\r\n\r\n\x89PNG\r\n", ""},
		"cut in the middle of its part": {"Content-Type: multipart/mixed; boundary=o\r\n\r\n" +
			"--o\r\nContent-Type: text/plain\r\n\r\nthe start of a long te", "the start of a long te"},
		"cut in the middle of the HTML": {"Content-Type: text/html\r\n\r\n<div>one</div><div>tw", "one\ntw"},
		"html": {"Content-Type: text/html\r\n\r\n<html><head><style>b{}</style></head><body>" +
			"a<br>b&nbsp;&lt;c&gt; <script>x()</script><ul><li>d</li><li>e</li></ul></body></html>", "a\nb <c>\nd\ne"},
		"two breaks":            {"Content-Type: text/html\r\n\r\none<br><br>two<br/>three", "one\n\ntwo\nthree"},
		"control characters go": {"\r\n\r\nbell\a and \x1b[31mred\x1b[0m\r\n\r\n\r\n\r\nend  \r\n", "bell and [31mred[0m\n\nend"},
	} {
		assert.Equal(t, tc.want, text(tc.raw), name)
	}
}

func TestReadTextBounded(t *testing.T) {
	long := strings.Repeat("€", mail.MaxMailText) // 3 bytes each
	got := text("Content-Type: text/plain; charset=utf-8\r\n\r\n" + long)
	assert.LessOrEqual(t, len(got), mail.MaxMailText)
	assert.Greater(t, len(got), mail.MaxMailText-utf8.UTFMax)
	assert.True(t, utf8.ValidString(got))
	assert.True(t, strings.HasPrefix(long, got))

	// Latin-1 grows as it is decoded: still bounded.
	got = text("Content-Type: text/plain; charset=iso-8859-1\r\n\r\n" + strings.Repeat("\xe9", 2*mail.MaxMailText))
	assert.LessOrEqual(t, len(got), mail.MaxMailText)
	assert.Equal(t, strings.Repeat("é", mail.MaxMailText/2), got)

	// Multiparts nested deeper than maxDepth are not looked into.
	deep := "Content-Type: multipart/mixed; boundary=b0\r\n\r\n"
	for i := 1; i <= maxDepth+1; i++ {
		deep += "--b" + string(rune('0'+i-1)) + "\r\nContent-Type: multipart/mixed; boundary=b" + string(rune('0'+i)) + "\r\n\r\n"
	}
	deep += "--b" + string(rune('0'+maxDepth+1)) + "\r\n\r\ndeep\r\n"
	assert.Empty(t, text(deep))
}

func TestCut(t *testing.T) {
	assert.Equal(t, "ab", cut("ab", 2))
	assert.Equal(t, "a", cut("aé", 2))
	assert.Equal(t, "aé", cut("aé", 3))
	assert.Equal(t, "", cut("€", 2))
}
