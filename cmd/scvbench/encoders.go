package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"scv/control/api"
	"scv/control/daemon/daemonproc"
	"scv/control/rpc"
)

// EncoderResult compares the daemon's two reply encoders under the
// 256-client run-progress load: the stock build, whose appendResponse
// appends the common replies by hand (appendStatus), and a build of the
// same tree whose appendResponse always uses marshal (encoding/json).
// The second build exists only in this run: the harness patches a copy of
// control/server.go and builds with `go build -overlay`; the tree is not
// changed.
type EncoderResult struct {
	Clients int `json:"clients"`
	// Patch is what was changed in the copy.
	Patch   string       `json:"patch"`
	Windows []EncoderWin `json:"windows"`
	Hand    LevelResult  `json:"hand"`    // appendStatus, pooled
	Marshal LevelResult  `json:"marshal"` // encoding/json, pooled
	Ratio   float64      `json:"ratio"`   // Marshal req/s over Hand req/s
	Build   float64      `json:"build_seconds"`
	Skipped string       `json:"skipped,omitempty"`
}

// EncoderWin is one window of one build.
type EncoderWin struct {
	Encoder string      `json:"encoder"`
	Level   LevelResult `json:"level"`
}

// The patch: appendResponse's branch to appendStatus is never taken.
const (
	encoderFunc   = "func appendResponse("
	encoderBranch = "if r.Result != nil {"
	encoderPatch  = "if r.Result != nil && false {"
)

// patchMarshal returns control/server.go's source s with the patch made.
func patchMarshal(s string) (string, error) {
	f := strings.Index(s, encoderFunc)
	if f < 0 {
		return "", fmt.Errorf("no %s", encoderFunc)
	}
	i := strings.Index(s[f:], encoderBranch)
	if i < 0 || i > 400 {
		return "", fmt.Errorf("appendResponse does not start with %q any more: the experiment needs updating", encoderBranch)
	}
	i += f
	return s[:i] + encoderPatch + s[i+len(encoderBranch):], nil
}

// buildMarshalDaemon builds the daemon with appendResponse always using
// marshal, to bin.
func buildMarshalDaemon(ctx context.Context, dir, bin string) error {
	pkg, err := goListDir(ctx, "scv/control")
	if err != nil {
		return err
	}
	src := filepath.Join(pkg, "server.go")
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	s, err := patchMarshal(string(b))
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	patched := filepath.Join(dir, "server_marshal.go")
	if err := os.WriteFile(patched, []byte(s), 0o644); err != nil {
		return err
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {src: patched}})
	if err != nil {
		return err
	}
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o644); err != nil {
		return err
	}
	return daemonproc.Build(ctx, bin, "-overlay", ov)
}

// goListDir is the folder of package pkg in the working tree.
func goListDir(ctx context.Context, pkg string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-f", "{{.Dir}}", pkg).Output()
	if err != nil {
		return "", fmt.Errorf("go list %s: %w", pkg, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// encoders runs the 256-client run-progress level on the two builds,
// each on a database of its own, in windows A B B A A B, pooled per
// build.
func encoders(ctx context.Context, cfg Config, bin, dir string, logf func(string, ...any)) (EncoderResult, error) {
	clients := cfg.Levels[len(cfg.Levels)-1]
	res := EncoderResult{Clients: clients, Patch: "control/server.go appendResponse: `" + encoderBranch + "` → `" + encoderPatch + "`"}
	alt := filepath.Join(dir, "scv-marshal")
	t := time.Now()
	if err := buildMarshalDaemon(ctx, dir, alt); err != nil {
		res.Skipped = err.Error()
		logf("  encoder experiment skipped: %v", err)
		return res, nil
	}
	res.Build = time.Since(t).Seconds()
	logf("  built the marshal-only daemon in %.1f s", res.Build)

	// Each side's clients start their runs once, so that both projects
	// hold the same tasks in every window.
	type side struct {
		name    string
		d       *daemonproc.Daemon
		project string
		conns   []*conn
		runs    []string
		levels  []LevelResult
	}
	var sides []*side
	defer func() {
		for _, s := range sides {
			closeAll(s.conns)
			s.d.Kill()
		}
	}()
	for _, b := range []struct{ name, bin string }{{"hand", bin}, {"marshal", alt}} {
		d, err := daemonproc.Start(b.bin, filepath.Join(dir, "enc-"+b.name+".db"), filepath.Join(dir, "enc-"+b.name+".sock"), "--stale-after", "1h")
		if err != nil {
			return res, err
		}
		s := &side{name: b.name, d: d}
		sides = append(sides, s)
		if _, err := d.Ready(ctx, time.Minute); err != nil {
			return res, err
		}
		c, err := rpc.Dial(ctx, d.Sock)
		if err != nil {
			return res, err
		}
		st, err := c.Call(ctx, api.CmdProjectCreate{Name: "encoders", Workspace: dir})
		c.Close()
		if err != nil {
			return res, fmt.Errorf("project_create: %w", err)
		}
		s.project = st.Project.Project.ID
		if s.conns, err = dialAll(ctx, []string{d.Sock}, clients); err != nil {
			return res, err
		}
		if s.runs, err = startRuns(ctx, s.conns, []string{s.project}, "encoders"); err != nil {
			return res, err
		}
	}
	for k, i := range []int{0, 1, 1, 0, 0, 1} {
		s := sides[i]
		logf("  %d clients, %s encoder", clients, s.name)
		l := load{conns: s.conns, warm: cfg.Warmup / 2, d: cfg.Duration / 2, pids: []int{s.d.Pid()}, perUnit: 1,
			unit: func(ctx context.Context, i int, c *conn, step int) error {
				_, err := c.call(ctx, progressParams(s.project, s.runs[i], k*1_000_000+step))
				return err
			}}
		lr, _, _, err := l.run(ctx)
		if err != nil {
			return res, fmt.Errorf("%s: %w", s.name, err)
		}
		s.levels = append(s.levels, lr)
		res.Windows = append(res.Windows, EncoderWin{Encoder: s.name, Level: lr})
	}
	res.Hand, res.Marshal = poolLevels(sides[0].levels), poolLevels(sides[1].levels)
	if res.Hand.RequestsPerSec > 0 {
		res.Ratio = res.Marshal.RequestsPerSec / res.Hand.RequestsPerSec
	}
	for _, s := range sides {
		if err := s.d.Stop(); err != nil {
			return res, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return res, nil
}
