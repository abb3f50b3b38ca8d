package render

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCleanAndCut(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "a b c", Clean("a\tb\nc"))
	assert.Equal(t, "a\uFFFDb", Clean("a\u202Eb"), "a bidirectional override cannot reorder the line")
	assert.Equal(t, "abcd…", Cut("abcdefgh", 5))
	assert.Equal(t, "héllo", Cut("héllo", 5))
	assert.Equal(t, "日本…", Cut("日本語です", 5), "wide characters take two columns")
	assert.Equal(t, "abcdefgh", Cut("abcdefgh", 0), "no width: as it is")
}

// TestTable: columns as wide as their widest cell, counted in terminal
// columns (a wide title keeps the next column in line); a table wider
// than the width is cut in its free-text columns first, then at the
// width, never wrapped; status words coloured, the padding outside the
// colour.
func TestTable(t *testing.T) {
	t.Parallel()
	tb := NewTable("ID", "~TITLE", "!STATUS")
	tb.Add("A", "build", "done")
	tb.Add("B", "日本語", "failed")
	var b strings.Builder
	require.NoError(t, tb.Write(&b, TextOptions{}))
	assert.Equal(t, ""+
		"ID  TITLE   STATUS\n"+
		"A   build   done\n"+
		"B   日本語  failed\n", b.String())

	b.Reset()
	require.NoError(t, tb.Write(&b, TextOptions{Color: true}))
	assert.Contains(t, b.String(), "A   build   \x1b[32mdone\x1b[0m\n")
	assert.Contains(t, b.String(), "B   日本語  \x1b[31mfailed\x1b[0m\n")

	long := NewTable("ID", "~TITLE", "~PROGRESS")
	long.Add("01M8KF5HZMR2V8G5FA1F7A82HB", strings.Repeat("a very long title ", 6), strings.Repeat("compiling ", 9))
	for _, width := range []int{30, 60, 80} {
		b.Reset()
		require.NoError(t, long.Write(&b, TextOptions{Width: width}))
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		require.Len(t, lines, 2, "one line a row: %q", b.String())
		for _, l := range lines {
			assert.LessOrEqual(t, cells(l), width, "%q", l)
		}
		assert.Contains(t, lines[1], "…")
	}

	block := Block()
	block.Add("status", "active")
	block.Add("progress", "1/2 tasks done")
	b.Reset()
	require.NoError(t, block.Write(&b, TextOptions{Color: true}))
	assert.Equal(t, "status    \x1b[36mactive\x1b[0m\nprogress  1/2 tasks done\n", b.String())
}

func TestPaint(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "\x1b[32mdone\x1b[0m", Paint("done", true))
	assert.Equal(t, "done", Paint("done", false))
	assert.Equal(t, "frobnicated", Paint("frobnicated", true), "a word that is no status")
	assert.Equal(t, "unknown", Paint("unknown", true))
}
