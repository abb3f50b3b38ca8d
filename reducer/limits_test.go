package reducer_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/reducer"
)

// TestLimits: every limit of limits.go, at the limit and one past it.
// Text is counted in characters, not bytes (é is two bytes). A refusal is
// ErrInvalidArgument whose message names the field, its length and the
// limit, never the text; a reference past its limit is refused so whether
// or not the project exists.
func TestLimits(t *testing.T) {
	chars := func(n int) string { return strings.Repeat("é", n) }
	deps := func(n int) []string {
		ds := make([]string, n)
		for i := range ds {
			ds[i] = fmt.Sprint("d", i)
		}
		return ds
	}
	var manyTasks []reducer.Command // the tasks deps names
	for _, d := range deps(reducer.MaxDependsOn) {
		manyTasks = append(manyTasks, reducer.AddTask{Project: projID, TaskID: d, Title: d})
	}
	long := reducer.AddTask{Project: projID, TaskID: "long", Title: chars(reducer.MaxNameLen)}
	// Task "a" is ready; run "r1" of task "b" is running.
	base := cmds(add("a", 0), add("b", 0), start("b", "r1"))
	ask := func(q string) reducer.AskApproval {
		return reducer.AskApproval{Project: projID, QuestionID: "q1", Question: q, Deadline: cmdNow + 1}
	}
	startAs := func(agent string) reducer.StartRun {
		return reducer.StartRun{Project: projID, TaskID: "a", RunID: "r2", Agent: agent}
	}

	for _, tc := range []struct {
		name  string
		setup []reducer.Command
		cmd   reducer.Command
		want  string // the refusal's message; "" accepts
	}{
		{name: "name at the limit", cmd: createNamed(chars(200))},
		{name: "name past the limit", cmd: createNamed(chars(201)), want: "name is 201 characters, more than 200"},
		{name: "name of spaces", cmd: createNamed("   "), want: "name is only white space"},
		{name: "name of other white space", cmd: createNamed("\u3000\u00a0"), want: "name is only white space"},
		{name: "name empty", cmd: createNamed(""), want: "name is empty"},
		{name: "name with spaces around", cmd: createNamed(" a "), want: ""},
		{name: "name with a tab", cmd: createNamed("a\tb"), want: "name contains control character U+0009"},
		{name: "title at the limit", cmd: addTitled(chars(200))},
		{name: "title past the limit", cmd: addTitled(chars(201)), want: "title is 201 characters, more than 200"},
		{name: "title of spaces", cmd: addTitled("  "), want: "title is only white space"},
		{name: "title with a newline", cmd: addTitled("a\nb"), want: "title contains control character U+000A"},
		{name: "title past the limit, of a missing project", cmd: reducer.AddTask{Project: "ghost", TaskID: "t", Title: chars(5000)},
			want: "title is 5000 characters, more than 200"},
		{name: "agent at the limit", cmd: startAs(chars(200))},
		{name: "agent past the limit", cmd: startAs(chars(201)), want: "agent is 201 characters, more than 200"},
		{name: "agent of spaces", cmd: startAs(" "), want: "agent is only white space"},

		{name: "run progress at the limit, with newlines", cmd: progress("r1", "a\n"+chars(1998))},
		{name: "run progress empty", cmd: progress("r1", "")},
		{name: "run progress past the limit", cmd: progress("r1", chars(2001)), want: "progress is 2001 characters, more than 2000"},
		{name: "run progress of 5000", cmd: progress("r1", strings.Repeat("p", 5000)), want: "progress is 5000 characters, more than 2000"},
		{name: "run progress with a tab", cmd: progress("r1", "a\tb")},
		{name: "run progress with a carriage return", cmd: progress("r1", "a\r\nb"), want: "progress contains control character U+000D"},
		{name: "run progress not UTF-8", cmd: progress("r1", "a\xffb"), want: "progress is not valid UTF-8"},
		{name: "task progress at the limit", cmd: updP("a", blocked, chars(2000))},
		{name: "task progress past the limit", cmd: updP("a", blocked, chars(2001)), want: "progress is 2001 characters, more than 2000"},
		{name: "task progress with an escape", cmd: updP("a", blocked, "\x1b[2J"), want: "progress contains control character U+001B"},

		{name: "question at the limit, with newlines", cmd: ask("ship?\n" + chars(1994))},
		{name: "question past the limit", cmd: ask(chars(2001)), want: "question is 2001 characters, more than 2000"},
		{name: "question blank", cmd: ask(" \n "), want: "question is only white space"},
		{name: "question empty", cmd: ask(""), want: "question is empty"},
		{name: "question with a C1 control", cmd: ask("a\u0085b"), want: "question contains control character U+0085"},
		{name: "question with a tab", cmd: ask("a\tb"), want: "question contains control character U+0009"},

		{name: "depends_on at the limit", setup: manyTasks, cmd: add("t", 0, deps(100)...)},
		{name: "depends_on past the limit", cmd: add("t", 0, deps(101)...), want: "depends_on has 101 entries, more than 100"},
		{name: "depends_on entry at the limit", setup: cmds(long), cmd: add("t", 0, "a", chars(200))},
		{name: "depends_on entry past the limit", cmd: add("t", 0, "a", chars(201)), want: "depends_on[1] is 201 characters, more than 200"},

		{name: "task reference at the limit", setup: cmds(long), cmd: upd(chars(200), blocked)},
		{name: "task reference past the limit", cmd: upd(chars(201), blocked), want: "task is 201 characters, more than 200"},
		{name: "task reference of a heartbeat past the limit", cmd: beat(chars(201), ""), want: "task is 201 characters, more than 200"},
		{name: "run reference past the limit", cmd: finish(chars(201), succeeded), want: "run is 201 characters, more than 200"},
		{name: "project reference past the limit", cmd: reducer.ReleaseProject{Project: chars(201)},
			want: "project is 201 characters, more than 200"},
		{name: "project reference at the limit, of no project", cmd: reducer.ReleaseProject{Project: chars(200)},
			want: "project \"" + chars(200) + "\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLedger(t)
			l.do(baseProject)
			l.do(base...)
			l.do(tc.setup...)
			evs, err := l.s.decide(withNow(tc.cmd, cmdNow))
			if tc.want == "" {
				require.NoError(t, err)
				assert.NotEmpty(t, evs)
				return
			}
			require.Error(t, err)
			assert.Empty(t, evs)
			if strings.HasPrefix(tc.want, "project \"") {
				assert.ErrorIs(t, err, reducer.ErrNotFound, "a reference within its limit is looked up")
				return
			}
			assert.ErrorIs(t, err, reducer.ErrInvalidArgument)
			assert.Equal(t, "invalid argument: "+tc.want, err.Error())
		})
	}
}

// TestLimitsNotOnReplay: Evolve never checks a limit, so a history written
// before one (a title of spaces, a progress of 5,000 characters with a
// carriage return) still replays.
func TestLimitsNotOnReplay(t *testing.T) {
	l := newLedger(t)
	l.do(baseProject)
	old := strings.Repeat("p\r", 2500)
	l.evolve(
		reducer.Event{ProjectID: projID, Time: cmdNow, Body: reducer.TaskAdded{TaskID: "a", Title: "   ", DependsOn: []string{}}},
		reducer.Event{ProjectID: projID, Time: cmdNow, Body: reducer.RunStarted{RunID: "r1", TaskID: "a", Agent: "agent"}},
		reducer.Event{ProjectID: projID, Time: cmdNow, Body: reducer.RunProgress{RunID: "r1", Progress: old}},
	)
	r, ok := l.project().Run("r1")
	require.True(t, ok)
	require.NotNil(t, r.Progress)
	assert.Equal(t, old, *r.Progress)
	tk, _ := l.project().Task("a")
	assert.Equal(t, "   ", tk.Title)
}

// TestClipProgress: the progress the daemon makes itself is cut, never
// refused: what ClipProgress returns, ValidProgress accepts.
func TestClipProgress(t *testing.T) {
	cut := strings.Repeat("é", reducer.MaxProgressLen-1) + "…"
	for _, tc := range []struct{ name, in, want string }{
		{"short", "tests pass", "tests pass"},
		{"empty", "", ""},
		{"at the limit", strings.Repeat("é", 2000), strings.Repeat("é", 2000)},
		{"one past the limit", strings.Repeat("é", 2001), cut},
		{"far past the limit", strings.Repeat("é", 50_000), cut},
		{"newlines kept", "a\nb", "a\nb"},
		{"control characters made spaces, but tabs", "a\tb\rc\x1bd\u0085e\x7f", "a\tb c d e "},
		{"not UTF-8", "a\xffb", "a\uFFFDb"},
	} {
		got := reducer.ClipProgress(tc.in)
		assert.Equal(t, tc.want, got, tc.name)
		assert.NoError(t, reducer.ValidProgress(got), tc.name)
	}
}

// FuzzClipProgress: whatever the text, ClipProgress makes a valid progress
// text of at most MaxProgressLen characters, and leaves a valid one as it
// is.
func FuzzClipProgress(f *testing.F) {
	for _, s := range []string{"", "ok", "a\nb", "\xff\xfe", strings.Repeat("🙂", 2001), "a\x00b\u0085"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := reducer.ClipProgress(s)
		require.NoError(t, reducer.ValidProgress(got))
		assert.LessOrEqual(t, utf8.RuneCountInString(got), reducer.MaxProgressLen)
		if reducer.ValidProgress(s) == nil {
			assert.Equal(t, s, got)
		}
	})
}
