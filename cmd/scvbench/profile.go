package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"scv/control/daemon/daemonproc"
)

// With -profile DIR the harness builds a daemon that serves
// net/http/pprof on a Unix socket beside its control socket (SOCK.pprof)
// when $SCVBENCH_PPROF is set, and takes a CPU profile of the daemon over
// each named window, into DIR/NAME.pprof, for `go tool pprof`. The extra
// file exists only in this build (`go build -overlay`); the tree is not
// changed. Profiling costs the daemon some CPU, so the figures of a run
// with -profile are not the ones to quote.

// profileDir is where the profiles go; "" when not profiling.
var profileDir string

// pprofEnv switches the profiling build's pprof socket on.
const pprofEnv = "SCVBENCH_PPROF"

// pprofSource is the file the profiling build adds to package main of
// cmd/scv.
const pprofSource = `package main

import (
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"strings"
)

// Added by scvbench -profile for one run: net/http/pprof on SOCK.pprof.
func init() {
	if os.Getenv("` + pprofEnv + `") == "" {
		return
	}
	sock := ""
	for i, a := range os.Args {
		if a == "--socket" && i+1 < len(os.Args) {
			sock = os.Args[i+1]
		} else if v, ok := strings.CutPrefix(a, "--socket="); ok {
			sock = v
		}
	}
	if sock == "" {
		return
	}
	os.Remove(sock + ".pprof")
	ln, err := net.Listen("unix", sock+".pprof")
	if err != nil {
		return
	}
	go http.Serve(ln, nil)
}
`

// buildProfilingDaemon builds the daemon with the pprof socket to bin.
func buildProfilingDaemon(ctx context.Context, dir, bin string) error {
	main, err := goListDir(ctx, "scv/cmd/scv")
	if err != nil {
		return err
	}
	src := filepath.Join(dir, "zz_scvbench_pprof.go")
	if err := os.WriteFile(src, []byte(pprofSource), 0o644); err != nil {
		return err
	}
	ov := filepath.Join(dir, "pprof-overlay.json")
	if err := os.WriteFile(ov, []byte(fmt.Sprintf(`{"Replace":{%q:%q}}`, filepath.Join(main, "zz_scvbench_pprof.go"), src)), 0o644); err != nil {
		return err
	}
	if err := daemonproc.Build(ctx, bin, "-overlay", ov); err != nil {
		return err
	}
	return os.Setenv(pprofEnv, "1")
}

// profileWindow takes a CPU profile and an allocation profile of the
// daemon at sock for d, into profileDir/name.pprof and
// profileDir/name.allocs.pprof, and an execution trace of its first
// traceSeconds into profileDir/name.trace; nothing when not profiling.
func profileWindow(ctx context.Context, sock, name string, d time.Duration) error {
	if profileDir == "" || name == "" {
		return nil
	}
	secs := max(1, int(d.Seconds()))
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "unix", sock+".pprof")
	}}}
	allocs, trace := make(chan error, 1), make(chan error, 1)
	go func() {
		allocs <- fetchProfile(ctx, c, fmt.Sprintf("allocs?seconds=%d", secs), safeName(name)+".allocs.pprof")
	}()
	go func() {
		trace <- fetchProfile(ctx, c, fmt.Sprintf("trace?seconds=%d", min(secs, traceSeconds)), safeName(name)+".trace")
	}()
	err := errors.Join(fetchProfile(ctx, c, fmt.Sprintf("profile?seconds=%d", secs), safeName(name)+".pprof"), <-allocs, <-trace)
	if err != nil {
		return fmt.Errorf("profile %s: %w", name, err)
	}
	return nil
}

// traceSeconds bounds a window's execution trace: two seconds of 256
// clients are about 9 MB.
const traceSeconds = 2

// fetchProfile writes the daemon's /debug/pprof/query into
// profileDir/file.
func fetchProfile(ctx context.Context, c *http.Client, query, file string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://daemon/debug/pprof/"+query, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s: %s", query, resp.Status, b)
	}
	f, err := os.Create(filepath.Join(profileDir, file))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// profileHarness takes a CPU profile of the harness's own process (its
// clients) for d, into profileDir/harness-name.pprof, to set beside the
// daemon's; nothing when not profiling.
func profileHarness(name string, d time.Duration) error {
	if profileDir == "" || name == "" {
		return nil
	}
	f, err := os.Create(filepath.Join(profileDir, "harness-"+safeName(name)+".pprof"))
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	time.Sleep(d)
	pprof.StopCPUProfile()
	return f.Close()
}

// safeName makes a window's label a file name.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '-'
	}, s)
}
