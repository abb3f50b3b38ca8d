package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/daemon"
)

// TestMain lets the test binary be `scv` itself for the transcripts
// (testscript.RunMain): `exec scv …` in a script, and `scv` on the PATH
// of the shells a script starts.
func TestMain(m *testing.M) {
	os.Exit(testscript.RunMain(m, map[string]func() int{
		"scv": func() int { return run(os.Args[1:], os.Stdout, os.Stderr) },
	}))
}

var update = flag.Bool("update", false, "rewrite testdata/script/readme.txtar from README.md")

// TestScripts runs the transcripts of testdata/script: each starts with a
// daemon of its own, in-process, on the default paths of a home folder
// of its own ($HOME/.local/state/scv/ledger.db), its socket in
// $SCV_SOCKET, in time zone UTC. `scv` is this binary.
func TestScripts(t *testing.T) {
	t.Parallel()
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup:               scriptSetup,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"cmpnorm": cmpNorm,
			"capture": capture,
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
	for k, v := range map[string]string{
		"HOME": home, "XDG_STATE_HOME": "", "XDG_RUNTIME_DIR": "", "XDG_CONFIG_HOME": filepath.Join(home, ".config"),
		"SCV_DB": "", "SCV_SOCKET": sock, "TZ": "UTC", "NO_COLOR": "", "COLUMNS": "", "SCV_PARENT": "",
	} {
		env.Setenv(k, v)
	}
	d := daemon.New(daemon.Config{
		DB: filepath.Join(home, ".local", "state", "scv", "ledger.db"), Socket: sock,
		ConfigPath: filepath.Join(home, ".config", "scv", "channels.json"), Version: version,
		// The sweeper wakes every twentieth of the window: an hour keeps
		// it out of the transcripts (and out of a race between
		// ledger.MarkStale's read of lastTime and appendBatch's write,
		// in ledger/, that a sweep during writes shows under -race).
		StaleAfter: time.Hour,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Open(ctx); err != nil {
		return err
	}
	go d.Serve()
	env.Defer(func() { d.Close() })
	return nil
}

// capture VAR sets $VAR to the last command's stdout, trimmed.
func capture(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: capture VAR")
	}
	v := strings.TrimSpace(ts.ReadFile("stdout"))
	if v == "" {
		ts.Fatalf("capture %s: the command printed nothing", args[0])
	}
	ts.Setenv(args[0], v)
}

// cmpnorm stdout|stderr FILE compares the output with FILE as people
// read them: IDs, times, ages, hashes and paths differ from run to run,
// so each is replaced by a placeholder (IDs numbered in the order they
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
	normPath = regexp.MustCompile(`(^|\s)/\S*`)
	normGap  = regexp.MustCompile(` {2,}`)
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
	s = normPath.ReplaceAllString(s, "$1<PATH>")
	return normGap.ReplaceAllString(s, "  ")
}

// readmeScript is the transcript of README.md's walk-through: the text
// between the markers below, where an indented line `$ COMMAND` is a
// command and the indented lines after it what it prints. Each command
// runs in sh, as pasted into a shell (a trailing `# comment` dropped),
// its stdout and stderr together; `VAR=$(…)` sets VAR for the commands
// after it.
func readmeScript(readme string) (string, error) {
	const begin, end = "<!-- transcript: cmd/scv/testdata/script/readme.txtar -->", "<!-- end of transcript -->"
	_, rest, ok := strings.Cut(readme, begin)
	if !ok {
		return "", fmt.Errorf("README.md has no %q", begin)
	}
	region, _, ok := strings.Cut(rest, end)
	if !ok {
		return "", fmt.Errorf("README.md has no %q", end)
	}
	var script, files strings.Builder
	script.WriteString("# Generated from README.md by TestReadmeTranscript; do not edit: edit the\n" +
		"# README and run `go test ./cmd/scv -run TestReadmeTranscript -update`.\n" +
		"# Each command of the walk-through, run by sh as a user pastes it,\n" +
		"# prints what the README shows.\n")
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
	for line := range strings.SplitSeq(region, "\n") {
		if !strings.HasPrefix(line, "    ") {
			flush()
			continue
		}
		line = strings.TrimPrefix(line, "    ")
		cmd, isCmd := strings.CutPrefix(line, "$ ")
		if !isCmd {
			if out == nil {
				return "", fmt.Errorf("README.md: output %q before any command", line)
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

// TestReadmeTranscript: testdata/script/readme.txtar is README.md's
// walk-through, so that TestScripts runs it: README and transcript can
// never differ.
func TestReadmeTranscript(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	script, err := readmeScript(string(readme))
	require.NoError(t, err)
	path := filepath.Join("testdata", "script", "readme.txtar")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(script), 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, script, string(got), "README.md changed: run go test ./cmd/scv -run TestReadmeTranscript -update")
}
