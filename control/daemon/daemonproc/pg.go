package daemonproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// PG is a private PostgreSQL cluster for a harness, run with cmd/scvpg
// (Debian's postgresql package, a Unix socket, fsync on): the server
// the fleet measures and checks run against. Databases are made with
// PostgreSQL's own createdb; the harness itself runs no SQL.
type PG struct {
	scvpg string // the built scvpg binary
	// Root is a folder others may traverse (as root, scvpg runs the
	// server as the user postgres); Dir, inside it, the cluster's data
	// and socket.
	Root string
	Dir  string
	// URL is the admin URL of the cluster (database postgres).
	URL string
}

// PGProgram finds a PostgreSQL program: on PATH, else in Debian's newest
// /usr/lib/postgresql/N/bin.
func PGProgram(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return a > b
	})
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("no %s on PATH or in /usr/lib/postgresql/*/bin", name)
}

// ErrNoPostgreSQL: the PostgreSQL programs a cluster needs are not
// installed.
var ErrNoPostgreSQL = errors.New("PostgreSQL is not installed")

// StartPG builds cmd/scvpg into binDir and starts a new cluster in a
// folder of its own under the system's temporary folder (short enough
// for the socket's path). Close stops it and removes it.
func StartPG(ctx context.Context, binDir string) (*PG, error) {
	for _, p := range []string{"initdb", "pg_ctl", "createdb"} {
		if _, err := PGProgram(p); err != nil {
			return nil, fmt.Errorf("%w (%v)", ErrNoPostgreSQL, err)
		}
	}
	root, err := os.MkdirTemp("", "scv-pg")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(root, 0o711); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	c := &PG{scvpg: filepath.Join(binDir, "scvpg"), Root: root, Dir: filepath.Join(root, "pg")}
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", c.scvpg, "scv/cmd/scvpg").CombinedOutput(); err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("go build scvpg: %v: %s", err, out)
	}
	out, err := c.scvpgRun(ctx, "start")
	if err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	c.URL = strings.TrimSpace(string(out))
	return c, nil
}

func (c *PG) scvpgRun(ctx context.Context, verb string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, c.scvpg, verb, c.Dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("scvpg %s: %v: %s", verb, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// Stop stops the server (fast shutdown: clients are disconnected), keeping
// its data; Start starts it again.
func (c *PG) Stop(ctx context.Context) error {
	_, err := c.scvpgRun(ctx, "stop")
	return err
}

// Start starts the stopped server again.
func (c *PG) Start(ctx context.Context) error {
	_, err := c.scvpgRun(ctx, "start")
	return err
}

// Close stops the server and removes the cluster.
func (c *PG) Close() {
	c.scvpgRun(context.Background(), "stop")
	os.RemoveAll(c.Root)
}

// Run runs a PostgreSQL client program in Root and returns its stdout.
func (c *PG) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	p, err := PGProgram(name)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, p, args...)
	cmd.Dir = c.Root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// CreateDB creates database name (with createdb) and returns its URL.
func (c *PG) CreateDB(ctx context.Context, name string) (string, error) {
	if _, err := c.Run(ctx, "createdb", "-h", c.Dir, "-U", "scv", name); err != nil {
		return "", err
	}
	return WithDatabase(c.URL, name), nil
}

// WithDatabase is the URL u naming database name.
func WithDatabase(u, name string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	p.Path = "/" + name
	return p.String()
}
