package render

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from what the package draws")

// golden compares got with testdata/name, or rewrites the file with
// -update:
//
//	go test ./control/render -update
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "no golden file; write it with go test ./control/render -update")
	assert.Equal(t, string(want), string(got), "%s differs; if the change is intended, rewrite it with -update", path)
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// assertFits checks that no line of out, colours left out, is wider than
// width columns.
func assertFits(t *testing.T, out []byte, width int) {
	t.Helper()
	for i, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		plain := ansi.ReplaceAllString(l, "")
		assert.LessOrEqual(t, cells(plain), width, "line %d is wider than %d columns: %q", i+1, width, plain)
		assert.NotContains(t, plain, "\x1b", "line %d: an escape byte outside the package's own colours", i+1)
	}
}

// hostileTitles are task titles meant to break a drawing: markup, quotes
// and backslashes, terminal escapes, wide and zero-width characters, a
// right-to-left override, and length.
var hostileTitles = []string{
	`<img src=x onerror=alert(1)>`,
	`"]; evil -> x [label="\N\G\\`,
	"red \x1b[31malert\x1b[0m and a bell \a",
	"line one\nline two\r\ttabbed",
	"构建 и тест — 🚀🚀🚀 ビルド",
	"e\u0301e\u0301e\u0301 combining",
	"abc\u202edcba reversed",
	strings.Repeat("a very long title ", 20),
	"&amp; &lt; ]]> <!-- -->",
}

func hostileProject() Project {
	p := diamond()
	p.Name = "<b>bold</b> & \"quoted\""
	for i, title := range hostileTitles {
		id := "h" + string(rune('0'+i))
		if i == 0 {
			id = `"><script>alert(1)</script>`
		}
		prio := i % 5
		p.Tasks = append(p.Tasks, Task{ID: id, Title: title, Status: taskStatuses[i%len(taskStatuses)], DependsOn: []string{p.Tasks[len(p.Tasks)-1].ID, "a"}, Attempts: i,
			Priority: &prio, Description: title, Parent: p.Tasks[len(p.Tasks)-1].ID, FoundIn: "b", FoundRun: "b2"})
		p.Runs = append(p.Runs, Run{ID: "r-" + id, TaskID: id, Status: runStatuses[i%len(runStatuses)], Start: at(30 + i), End: at(32 + i)})
		p.Markers = append(p.Markers, Marker{TaskID: id, At: at(31 + i), Kind: "<weird kind>", Label: title})
	}
	return p
}
