package render

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStripStyle: the SVGs without their <style> still parse, keep every
// node and bar, and the style sheet they dropped is StyleSheet's text.
func TestStripStyle(t *testing.T) {
	p := diamond()
	p.Tasks[0].Title = "<style>\nx{}</style>\n"
	for name, draw := range map[string]func(io.Writer, Project) error{"graph": GraphSVG, "timeline": TimelineSVG} {
		var b bytes.Buffer
		require.NoError(t, draw(&b, p))
		full := b.Bytes()
		stripped := StripStyle(full)
		assert.NotContains(t, string(stripped), "<style>", name)
		css := string(full[bytes.Index(full, []byte("<style>\n"))+len("<style>\n") : bytes.Index(full, []byte("</style>\n"))])
		assert.Contains(t, StyleSheet(), css, name)
		assert.Equal(t, len(full)-len("<style>\n</style>\n")-len(css), len(stripped), name)
		d := xml.NewDecoder(bytes.NewReader(stripped))
		for {
			_, err := d.Token()
			if err == io.EOF {
				break
			}
			require.NoError(t, err, name)
		}
		// The hostile title is still there, as escaped text.
		assert.Contains(t, string(stripped), "&lt;style&gt;", name)
	}
	assert.True(t, strings.HasPrefix(StyleSheet(), ".scv-graph"))
	assert.Contains(t, StyleSheet(), ".scv-timeline .bar")
	assert.Equal(t, []byte("<svg/>"), StripStyle([]byte("<svg/>")))
}
