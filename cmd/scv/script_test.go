package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/daemon"
	"scv/control/rpc"
	"scv/ledger/drivertest"
	"scv/ledger/sqlite/sqlitetest"
)

// TestMain lets the test binary be `scv` itself for the transcripts
// (testscript.Main): `exec scv …` in a script, and `scv` on the PATH
// of the shells a script starts.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"scv": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

var update = flag.Bool("update", false, "rewrite the transcripts of testdata/script from README.md and docs/ (TestTranscripts)")

// TestScripts runs the transcripts of testdata/script: each starts with a
// daemon of its own, in-process, on the default paths of a home folder
// of its own ($HOME/.local/state/scv/ledger.db), its socket in
// $SCV_SOCKET, in time zone UTC; $SOCKDIR is a folder with a path short
// enough for the sockets of other daemons a script starts; $MODROOT is
// the module's root, for the testdata of other packages. `scv` is this
// binary.
func TestScripts(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup:               scriptSetup,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"cmpnorm":    cmpNorm,
			"capture":    capture,
			"exits":      exits,
			"waitdaemon": waitDaemon,
			"waitlines":  waitLines,
			"tamper":     tamper,
		},
	})
}

func scriptSetup(env *testscript.Env) error {
	sockDir, err := os.MkdirTemp("", "scvts")
	if err != nil {
		return err
	}
	env.Defer(func() { os.RemoveAll(sockDir) })
	home := filepath.Join(env.WorkDir, "home")
	sock := filepath.Join(sockDir, "d.sock")
	agentDir, err := scriptAgent()
	if err != nil {
		return err
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return err
	}
	for k, v := range map[string]string{
		// acpagent, the scripted ACP agent that make build puts beside
		// scv, for the live agents of the transcripts.
		"PATH": agentDir + string(os.PathListSeparator) + env.Getenv("PATH"), "ACPAGENT_STATE": filepath.Join(env.WorkDir, "agent-state"),
		"HOME": home, "XDG_STATE_HOME": "", "XDG_RUNTIME_DIR": "", "XDG_CONFIG_HOME": filepath.Join(home, ".config"),
		"SCV_DB": "", "SCV_SOCKET": sock, "SOCKDIR": sockDir, "MODROOT": root, "TZ": "UTC", "NO_COLOR": "", "COLUMNS": "", "SCV_PARENT": "",
	} {
		env.Setenv(k, v)
	}
	// The daemon `make run` starts (`scv daemon` with its defaults: a
	// heartbeat journaled at most every 30 s, runs stale after 5 minutes),
	// on this home's paths, without the web UI.
	cfg, err := parseDaemonFlags([]string{"--db", filepath.Join(home, ".local", "state", "scv", "ledger.db"), "--socket", sock,
		"--config", filepath.Join(home, ".config", "scv", "channels.json")})
	if err != nil {
		return err
	}
	cfg.Version = version
	d := daemon.New(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Open(ctx); err != nil {
		return err
	}
	go d.Serve()
	env.Defer(func() { d.Close() })
	return nil
}

var (
	scriptAgentOnce sync.Once
	scriptAgentDir  string
	scriptAgentErr  error
)

// scriptAgent builds cmd/internal/acpagent once, into a folder of its own
// that it returns.
func scriptAgent() (string, error) {
	scriptAgentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "scvagent")
		if err != nil {
			scriptAgentErr = err
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "acpagent"), "scv/cmd/internal/acpagent").CombinedOutput()
		if err != nil {
			scriptAgentErr = fmt.Errorf("build acpagent: %w: %s", err, out)
		}
		scriptAgentDir = dir
	})
	return scriptAgentDir, scriptAgentErr
}

// capture VAR [PATTERN] sets $VAR to the last command's stdout, trimmed,
// or with PATTERN to what its first group matched there:
// capture T 'task (\S+) added'.
func capture(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: capture VAR [PATTERN]")
	}
	v := strings.TrimSpace(ts.ReadFile("stdout"))
	if len(args) == 2 {
		m := regexp.MustCompile(args[1]).FindStringSubmatch(v)
		if len(m) < 2 {
			ts.Fatalf("capture %s: no %q in the output", args[0], args[1])
		}
		v = m[1]
	}
	if v == "" {
		ts.Fatalf("capture %s: the command printed nothing", args[0])
	}
	ts.Setenv(args[0], v)
}

// exits CODE PROGRAM [ARGS...] runs PROGRAM as exec does, and fails
// unless it exits with CODE.
func exits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE PROGRAM [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = exit.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited %d, not %d", args[1], got, want)
	}
}

// waitdaemon SOCKET waits until a daemon answers on SOCKET (one started
// in the background by the script).
func waitDaemon(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitdaemon SOCKET")
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := rpc.Dial(ctx, args[0])
		if err == nil {
			_, err = c.Call(ctx, api.CmdStatus{})
			c.Close()
		}
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("no daemon answers on %s: %v", args[0], err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitlines FILE N waits until FILE (written by a command in the
// background) holds N lines: for a follower, proof that it follows (and
// catches SIGINT), however long its start took.
func waitLines(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitlines FILE N")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(ts.MkAbs(args[0]))
		if bytes.Count(b, []byte("\n")) >= n {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s holds %d lines, not %d, after 20 s", args[0], bytes.Count(b, []byte("\n")), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tamper DB SEQ DATA changes the data of event SEQ in the SQLite ledger
// file DB behind the ledger's back, dropping its append-only triggers
// first (sqlitetest.TamperFile).
func tamper(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: tamper DB SEQ DATA")
	}
	seq, err := strconv.ParseUint(args[1], 10, 64)
	ts.Check(err)
	ts.Check(sqlitetest.TamperFile(context.Background(), ts.MkAbs(args[0]), drivertest.EditEvent{Sequence: seq, Data: args[2]}))
}

// cmpnorm stdout|stderr FILE compares the output with FILE as people
// read them: IDs, times, ages, hashes, session IDs, process IDs (every
// number of three digits or more) and paths (also in a JSON string)
// differ from run to run, so
// each is replaced by a placeholder (IDs numbered in the order they
// appear, so that the same ID is the same placeholder) and runs of
// spaces between columns count as one gap.
func cmpNorm(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: cmpnorm stdout|stderr FILE")
	}
	got, want := normalize(ts.ReadFile(args[0])), normalize(ts.ReadFile(args[1]))
	if got != want {
		ts.Fatalf("%s differs from %s as people read it:\n--- got (normalized)\n%s--- want (normalized)\n%s--- got\n%s",
			args[0], args[1], got, want, ts.ReadFile(args[0]))
	}
}

var (
	normULID = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)
	normTime = regexp.MustCompile(`\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [A-Z]{3,4}\b`)
	normAge  = regexp.MustCompile(`\b(just now|\d+[smhd](\d+m)? ago|in \d+[smhd](\d+m)?)`)
	normHash = regexp.MustCompile(`\b[0-9a-f]{64}\b`)
	normPath = regexp.MustCompile(`(^|[\s"])/[^\s"]*`)
	normGap  = regexp.MustCompile(` {2,}`)
	// An ACP session's ID (acpagent's), the tail of an ID a narrow
	// column shows, and a process ID or another number of three digits or
	// more.
	normSession = regexp.MustCompile(`\bsess-[0-9a-f]{16}\b`)
	normIDTail  = regexp.MustCompile(`…[0-9A-HJKMNP-TV-Z]{8}\b`)
	normNumber  = regexp.MustCompile(`\b\d{3,}\b`)
	// The time a work took, on its summary's line `time`.
	normSpan = regexp.MustCompile(`(?m)^time +\d+[smhd](\d+[sm])?$`)
)

func normalize(s string) string {
	ids := map[string]string{}
	s = normULID.ReplaceAllStringFunc(s, func(id string) string {
		if _, ok := ids[id]; !ok {
			ids[id] = "<ID" + strconv.Itoa(len(ids)+1) + ">"
		}
		return ids[id]
	})
	s = normTime.ReplaceAllString(s, "<TIME>")
	s = normAge.ReplaceAllString(s, "<AGO>")
	s = normHash.ReplaceAllString(s, "<HASH>")
	s = normSession.ReplaceAllString(s, "sess-<ID>")
	s = normIDTail.ReplaceAllString(s, "…<ID>")
	s = normNumber.ReplaceAllString(s, "<N>")
	s = normSpan.ReplaceAllString(s, "time <SPAN>")
	s = normPath.ReplaceAllString(s, "$1<PATH>")
	return normGap.ReplaceAllString(s, "  ")
}

// transcripts are the documents whose walk-through is a transcript of
// testdata/script, which TestScripts runs: the document (from the
// module's root) and its script.
var transcripts = []struct{ doc, script string }{
	{"README.md", "readme.txtar"},
	{"docs/agents.md", "agents.txtar"},
	{"docs/usage.md", "usage.txtar"},
	{"docs/plan.md", "plan.txtar"},
	{"docs/work.md", "work.txtar"},
}

// TestTranscriptsFollowOneAnother: a newcomer follows the walk-throughs
// one after another, on one daemon, so no two create a project of the same
// name (the second would be refused, conflict).
func TestTranscriptsFollowOneAnother(t *testing.T) {
	create := regexp.MustCompile(`(?m)^    \$ scv (?:--\S+ \S+ )*project create (\S+)`)
	made := map[string]string{}
	for _, tr := range transcripts {
		text, err := os.ReadFile(filepath.Join("..", "..", tr.doc))
		require.NoError(t, err)
		_, region, _ := strings.Cut(string(text), "<!-- transcript: cmd/scv/testdata/script/"+tr.script+" -->")
		region, _, _ = strings.Cut(region, "<!-- end of transcript -->")
		for _, m := range create.FindAllStringSubmatch(region, -1) {
			if first, ok := made[m[1]]; ok && first != tr.doc {
				t.Errorf("%s creates project %s, which %s created before", tr.doc, m[1], first)
			}
			made[m[1]] = tr.doc
		}
	}
	require.NotEmpty(t, made)
}

// transcriptScript is the transcript of doc's walk-through (the text of
// the document named doc): the text between the markers below, where an
// indented line `$ COMMAND` is a command and the indented lines after it
// what it prints. Each command runs in sh, as pasted into a shell (a
// trailing `# comment` dropped), its stdout and stderr together;
// `VAR=$(…)` sets VAR for the commands after it. A fenced block of the
// document (anywhere in it) right after a line `<!-- file: NAME -->` is
// the file NAME in the folder the commands run in, as a reader saves it.
func transcriptScript(doc, name, text string) (string, error) {
	begin, end := "<!-- transcript: cmd/scv/testdata/script/"+name+" -->", "<!-- end of transcript -->"
	_, rest, ok := strings.Cut(text, begin)
	if !ok {
		return "", fmt.Errorf("%s has no %q", doc, begin)
	}
	region, _, ok := strings.Cut(rest, end)
	if !ok {
		return "", fmt.Errorf("%s has no %q", doc, end)
	}
	var script, files strings.Builder
	for _, m := range docFile.FindAllStringSubmatch(text, -1) {
		fmt.Fprintf(&files, "-- %s --\n%s\n", m[1], m[2])
	}
	fmt.Fprintf(&script, "# Generated from %s by TestTranscripts; do not edit: edit the\n"+
		"# document and run `go test ./cmd/scv -run TestTranscripts -update`.\n"+
		"# Each command of the walk-through, run by sh as a user pastes it,\n"+
		"# prints what the document shows.\n", doc)
	assign := regexp.MustCompile(`^([A-Z_][A-Z0-9_]*)=\$\((.*)\)$`)
	comment := regexp.MustCompile(`\s{2,}#\s.*$`)
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	n := 0
	var out *strings.Builder
	flush := func() {
		if out != nil {
			fmt.Fprintf(&script, "cmpnorm stdout out/%d\n", n)
			fmt.Fprintf(&files, "-- out/%d --\n%s", n, out.String())
			out = nil
		}
	}
	fenced := false
	for line := range strings.SplitSeq(region, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "    ") {
			flush()
			continue
		}
		line = strings.TrimPrefix(line, "    ")
		cmd, isCmd := strings.CutPrefix(line, "$ ")
		if !isCmd {
			if out == nil {
				return "", fmt.Errorf("%s: output %q before any command", doc, line)
			}
			out.WriteString(line + "\n")
			continue
		}
		flush()
		cmd = comment.ReplaceAllString(cmd, "")
		if m := assign.FindStringSubmatch(cmd); m != nil {
			fmt.Fprintf(&script, "exec sh -c %s\ncapture %s\n", quote(m[2]), m[1])
			continue
		}
		n++
		fmt.Fprintf(&script, "exec sh -c %s\n", quote(cmd+" 2>&1; exit 0"))
		out = &strings.Builder{}
	}
	flush()
	return script.String() + "\n" + files.String(), nil
}

// docFile is a file of a document's walk-through: a fenced block after
// `<!-- file: NAME -->`.
var docFile = regexp.MustCompile("(?s)<!-- file: (\\S+) -->\n```[^\n]*\n(.*?)\n```\n")

// TestTranscripts: testdata/script/readme.txtar is README.md's
// walk-through, and agents.txtar docs/agents.md's, so that TestScripts
// runs them: a document and its transcript can never differ.
func TestTranscripts(t *testing.T) {
	t.Parallel()
	for _, tr := range transcripts {
		text, err := os.ReadFile(filepath.Join("..", "..", tr.doc))
		require.NoError(t, err)
		script, err := transcriptScript(tr.doc, tr.script, string(text))
		require.NoError(t, err)
		path := filepath.Join("testdata", "script", tr.script)
		if *update {
			require.NoError(t, os.WriteFile(path, []byte(script), 0o644))
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, script, string(got), "%s changed: run go test ./cmd/scv -run TestTranscripts -update", tr.doc)
	}
}

// TestNormalizeSpan: the time a work took reads the same whatever it was,
// on the summary's `time` line only.
func TestNormalizeSpan(t *testing.T) {
	assert.Equal(t, normalize("time    0s\ncost    -\n"), normalize("time    2m\ncost    -\n"))
	assert.Equal(t, normalize("time    1h5m"), normalize("time    3s"))
	assert.NotEqual(t, normalize("took    0s"), normalize("took    2s"))
}
