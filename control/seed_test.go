package control_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/api"
	scvdaemon "scv/control/daemon"
)

// The tests in this file check the daemon against a client compiled from
// the seed's own Rust types (testdata/seedclient). They need cargo and
// Debian's serde sources; CI installs both and sets
// SCV_REQUIRE_SEEDCLIENT=1 so that a missing toolchain fails instead of
// skipping.

var (
	seedOnce sync.Once
	seedBin  string
	seedErr  error
)

func seedClient(t *testing.T) string {
	t.Helper()
	seedOnce.Do(func() {
		dir, err := filepath.Abs("testdata/seedclient")
		if err != nil {
			seedErr = err
			return
		}
		if _, err := exec.LookPath("cargo"); err != nil {
			seedErr = err
			return
		}
		if _, err := os.Stat("/usr/share/cargo/registry"); err != nil {
			seedErr = err
			return
		}
		cmd := exec.Command("cargo", "build", "--offline", "--release", "--quiet")
		cmd.Dir = dir // cargo reads .cargo/config.toml from here
		if out, err := cmd.CombinedOutput(); err != nil {
			seedErr = &buildError{out: string(out), err: err}
			return
		}
		seedBin = filepath.Join(dir, "target", "release", "seedclient")
	})
	if seedErr != nil {
		if os.Getenv("SCV_REQUIRE_SEEDCLIENT") != "" {
			t.Fatalf("seed client unavailable: %v", seedErr)
		}
		t.Skipf("seed client unavailable (install cargo, librust-serde-json-dev, librust-serde-derive-dev): %v", seedErr)
	}
	return seedBin
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// seedVerdict is what the seed client's decode said of one input line.
type seedVerdict struct {
	name string // the line's name, its first field
	ok   bool   // serde accepted it
	out  string // serde's encoding of what it read, or its error
}

// seedDecode feeds lines ("NAME\tKIND\tJSON") to the seed client's decode
// and returns its verdict on each, in order.
func seedDecode(t *testing.T, bin string, lines []string) []seedVerdict {
	t.Helper()
	cmd := exec.Command(bin, "decode")
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	out, err := cmd.Output()
	require.NoError(t, err)
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	require.Len(t, got, len(lines))
	verdicts := make([]seedVerdict, len(lines))
	for i, l := range got {
		v := strings.SplitN(l, "\t", 3)
		require.Len(t, v, 3, l)
		name, _, _ := strings.Cut(lines[i], "\t")
		require.Equal(t, name, v[0], "the verdicts come back in order")
		require.Contains(t, []string{"ok", "err"}, v[1], l)
		verdicts[i] = seedVerdict{name: v[0], ok: v[1] == "ok", out: v[2]}
	}
	return verdicts
}

// TestSeedDecodeAgreement feeds the same params to serde and to
// DecodeCommand: each must accept exactly what the other accepts, and an
// accepted command must re-encode to serde's bytes.
func TestSeedDecodeAgreement(t *testing.T) {
	bin := seedClient(t)
	corpus, err := os.ReadFile("testdata/serde-corpus.tsv")
	require.NoError(t, err)
	var lines []string
	for _, l := range strings.Split(string(corpus), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		lines = append(lines, l)
	}
	for i, v := range seedDecode(t, bin, lines) {
		raw := lines[i][strings.LastIndex(lines[i], "\t")+1:]
		t.Run(v.name, func(t *testing.T) {
			cmd, err := control.DecodeCommand([]byte(raw))
			if !v.ok {
				assert.Error(t, err, "serde refuses: %s", v.out)
				return
			}
			require.NoError(t, err, "serde accepts: %s", v.out)
			enc, err := api.EncodeCommand(cmd)
			require.NoError(t, err)
			assert.Equal(t, v.out, string(enc), "re-encoding differs from serde's")
		})
	}
}

// TestSeedClientDrive runs the seed client's whole lifecycle scenario
// against the daemon on a real socket: every reply must parse through the
// seed's DaemonStatus.
func TestSeedClientDrive(t *testing.T) {
	bin := seedClient(t)
	d := startDaemonWith(t, scvdaemon.Config{Version: "seed-test"})
	cmd := exec.Command(bin, "drive", d.sock)
	cmd.Env = append(os.Environ(), "TMPDIR="+d.dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	sc := bufio.NewScanner(bytes.NewReader(out))
	steps := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "step ") {
			steps++
		}
	}
	require.NoError(t, err, "seedclient drive:\n%s\n%s", out, stderr.String())
	assert.Contains(t, string(out), "seedclient drive: ok")
	assert.GreaterOrEqual(t, steps, 20, "the scenario ran every step:\n%s", out)
	t.Logf("seed client: %d steps passed", steps)
}
