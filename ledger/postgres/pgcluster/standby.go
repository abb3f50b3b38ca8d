package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// standbyName is the form of a standby's name: its application_name on
// the primary, which synchronous_standby_names matches.
var standbyName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,63}$`)

// StartStandby copies the running cluster into a streaming standby of it
// in dir (pg_basebackup over the cluster's socket, data in dir/data),
// starts it with the options Start uses, and returns it. The standby
// streams from the cluster as application_name name, the name
// SetSynchronous takes. It listens on a free TCP port of 127.0.0.1 if
// the cluster has a Port, else on its socket only. Run as root, it runs
// as the cluster's user, as Start does.
//
// The standby starts with no synchronous standby of its own, whatever the
// cluster's synchronous_standby_names (which the copy carries): promoted,
// it commits without waiting for anyone until SetSynchronous names a
// standby of its own. Stopped, it starts again with Start.
func (c *Cluster) StartStandby(dir, name string) (*Cluster, error) {
	if !standbyName.MatchString(name) {
		return nil, fmt.Errorf("standby name %q: want 1 to 63 letters, digits, '_', '.' or '-'", name)
	}
	s := &Cluster{Dir: dir, Log: c.Log}
	if c.Port != 0 {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		s.Port = p
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err == nil {
		return nil, fmt.Errorf("%s holds a cluster already (start it with Start)", dir)
	}
	if err := s.own(); err != nil {
		return nil, err
	}
	// -R writes standby.signal and a primary_conninfo with these
	// parameters, application_name among them.
	conninfo := "host=" + connValue(c.Dir) + " user=" + connValue(Role) + " application_name=" + connValue(name)
	if c.Port != 0 {
		conninfo += " port=" + strconv.Itoa(c.Port)
	}
	if err := s.runAs("pg_basebackup", "-D", data, "-d", conninfo, "-R", "-X", "stream", "-c", "fast"); err != nil {
		return nil, err
	}
	if err := s.serve(); err != nil {
		return nil, err
	}
	if err := s.SetSynchronous(); err != nil {
		s.Kill()
		return nil, fmt.Errorf("standby %s: %w", name, err)
	}
	return s, nil
}

// connValue quotes a value of a libpq connection string.
func connValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// SetSynchronous makes the cluster, a primary, wait at every commit until
// the first of the named standbys that is streaming has flushed it
// (synchronous_standby_names = 'FIRST 1 (names…)', synchronous_commit =
// on), and reloads its configuration. With no name, commits wait for no
// standby. The setting takes effect within moments, not at once: WaitSync
// waits until it has. Until a named standby streams, every commit waits
// (CreateDB's too): set it before StartStandby only with nothing to commit
// in between.
func (c *Cluster) SetSynchronous(names ...string) error {
	set := `ALTER SYSTEM RESET synchronous_standby_names`
	if len(names) > 0 {
		quoted := make([]string, len(names))
		for i, n := range names {
			if !standbyName.MatchString(n) {
				return fmt.Errorf("standby name %q: want 1 to 63 letters, digits, '_', '.' or '-'", n)
			}
			quoted[i] = `"` + n + `"`
		}
		set = `ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (` + strings.Join(quoted, ", ") + `)'`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.withConn(ctx, func(conn *pgx.Conn) error {
		// One statement at a time: ALTER SYSTEM refuses to run in a
		// transaction, and several statements in one message are one.
		for _, q := range []string{set, `ALTER SYSTEM SET synchronous_commit = on`, `SELECT pg_reload_conf()`} {
			if _, err := conn.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
}

// WaitSync waits until the standby named name streams from the cluster
// as its synchronous standby (in pg_stat_replication, state 'streaming'
// and sync_state 'sync'), or ctx is done.
func (c *Cluster) WaitSync(ctx context.Context, name string) error {
	var state, sync string
	for {
		err := c.query(ctx, `SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1`,
			[]any{name}, &state, &sync)
		if err == nil && state == "streaming" && sync == "sync" {
			return nil
		}
		if errors.Is(err, pgx.ErrNoRows) {
			state, sync = "not connected", ""
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("standby %s of %s: state %q, sync_state %q: %w", name, c.Dir, state, sync, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// query runs one query on a connection of its own and scans its one row.
func (c *Cluster) query(ctx context.Context, q string, args []any, dest ...any) error {
	return c.withConn(ctx, func(conn *pgx.Conn) error { return conn.QueryRow(ctx, q, args...).Scan(dest...) })
}

// Kill stops the server at once (immediate shutdown): every process of
// the server exits without a shutdown checkpoint, and what it had not
// sent its standbys stays with it, as when its machine dies. It starts
// again with crash recovery.
func (c *Cluster) Kill() error {
	return c.runAs("pg_ctl", "-D", filepath.Join(c.Dir, "data"), "-m", "immediate", "-w", "stop")
}

// Promote turns the cluster, a standby, into a primary (pg_ctl promote)
// and returns once it accepts writes.
func (c *Cluster) Promote() error {
	if err := c.runAs("pg_ctl", "-D", filepath.Join(c.Dir, "data"), "-w", "-t", "60", "promote"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		var recovering bool
		err := c.query(ctx, `SELECT pg_is_in_recovery()`, nil, &recovering)
		if err == nil && !recovering {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("promote %s: still not accepting writes (%v); see %s", c.Dir, err, filepath.Join(c.Dir, "server.log"))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// MultiHostURL is one URL of database db on every one of the clusters,
// through their Unix sockets, as their superuser, that connects to the
// first of them that accepts writes (target_session_attrs=read-write):
// postgres://scv@/db?host=/a,/b&port=5432,5433&target_session_attrs=read-write
// (the folders escaped; no port when no cluster has a Port). A pool on it
// reaches whichever cluster is the primary now, so it follows a
// promotion without being opened again.
func MultiHostURL(db string, clusters ...*Cluster) string {
	hosts, ports := make([]string, len(clusters)), make([]string, len(clusters))
	tcp := false
	for i, c := range clusters {
		hosts[i], ports[i] = url.QueryEscape(c.Dir), strconv.Itoa(c.port())
		tcp = tcp || c.Port != 0
	}
	q := "host=" + strings.Join(hosts, ",")
	if tcp {
		q += "&port=" + strings.Join(ports, ",")
	}
	q += "&target_session_attrs=read-write"
	return (&url.URL{Scheme: "postgres", User: url.User(Role), Path: "/" + db, RawQuery: q}).String()
}

// MultiHostTCPURL is MultiHostURL through the clusters' TCP ports:
// postgres://scv@127.0.0.1:P1,127.0.0.1:P2/db?target_session_attrs=read-write.
// It panics if a cluster has no Port.
func MultiHostTCPURL(db string, clusters ...*Cluster) string {
	hosts := make([]string, len(clusters))
	for i, c := range clusters {
		if c.Port == 0 {
			panic("pgcluster: MultiHostTCPURL of a cluster with no TCP port")
		}
		hosts[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Port))
	}
	return "postgres://" + url.User(Role).String() + "@" + strings.Join(hosts, ",") + "/" + url.PathEscape(db) +
		"?target_session_attrs=read-write"
}

// FreePort is a TCP port of 127.0.0.1 that nothing listens on, for a
// Cluster's Port. Another process may take it before the server does.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
