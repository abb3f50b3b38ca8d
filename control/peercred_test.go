package control_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// peerSocketEnv, when set, turns TestPeerCredentialHelper into the child
// process of runAsNobody: it connects to that socket and prints the first
// line the daemon sends.
const peerSocketEnv = "SCV_TEST_PEER_SOCKET"

// nobody is the uid and gid the child runs as: neither root nor the
// daemon's own.
const nobody = 65534

// TestPeerCredentialHelper is not a test on its own: it is the child
// process of runAsNobody. It prints one of
//
//	DIAL-ERROR EACCES=<true|false> <error>
//	REPLY <the daemon's first line>  then  AFTER <closed by the daemon?>
func TestPeerCredentialHelper(t *testing.T) {
	sock := os.Getenv(peerSocketEnv)
	if sock == "" {
		t.Skip("helper process for runAsNobody")
	}
	c, err := net.DialTimeout("unix", sock, ioTimeout)
	if err != nil {
		fmt.Printf("DIAL-ERROR EACCES=%v %v\n", errors.Is(err, syscall.EACCES), err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	// The daemon may refuse before reading anything; the write may fail.
	c.Write([]byte(request("1", `{"action":"project_create","name":"intruder","workspace":"/"}`) + "\n"))
	line, _ := bufio.NewReader(c).ReadBytes('\n')
	fmt.Printf("REPLY %s", line)
	if len(line) == 0 || line[len(line)-1] != '\n' {
		fmt.Println()
	}
	// After the refusal the daemon closes the connection: end of file, or
	// a reset because it never read what we wrote.
	_, err = c.Read(make([]byte, 1))
	fmt.Printf("AFTER %v\n", errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET))
}

// nobodyResult is what the child process saw.
type nobodyResult struct {
	out      string // everything it printed
	dialErr  string // the DIAL-ERROR line, "" if it connected
	eacces   bool   // the dial failed with EACCES
	reply    string // the daemon's first line, "" if none
	closedBy bool   // the daemon closed the connection after it
}

// runAsNobody runs this test binary as uid and gid 65534 (neither root
// nor the daemon's uid), connecting to sock and sending a project_create.
// It skips the test when not root, or when the system cannot run a
// process under another uid.
func runAsNobody(t *testing.T, sock string) nobodyResult {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to run a child process under another uid")
	}
	// The test binary may sit in a folder only we can read: run a copy,
	// from a folder of its own that anyone may enter (the socket's folder
	// may be closed to the child on purpose).
	binDir, err := os.MkdirTemp("", "scvbin")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(binDir) })
	require.NoError(t, os.Chmod(binDir, 0o755))
	self, err := os.Executable()
	require.NoError(t, err)
	data, err := os.ReadFile(self)
	require.NoError(t, err)
	bin := filepath.Join(binDir, "peer.test")
	require.NoError(t, os.WriteFile(bin, data, 0o755))

	cmd := exec.Command(bin, "-test.run=^TestPeerCredentialHelper$", "-test.v", "-test.count=1")
	cmd.Dir = binDir
	cmd.Env = append(os.Environ(), peerSocketEnv+"="+sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("cannot run a process as uid %d here: %v", nobody, err)
		}
		require.NoError(t, err, "helper output:\n%s", out.String())
	}
	r := nobodyResult{out: out.String()}
	for _, l := range strings.Split(r.out, "\n") {
		if s, ok := strings.CutPrefix(l, "DIAL-ERROR "); ok {
			r.dialErr = s
			r.eacces = strings.HasPrefix(s, "EACCES=true")
		}
		if s, ok := strings.CutPrefix(l, "REPLY "); ok {
			r.reply = s
		}
		if l == "AFTER true" {
			r.closedBy = true
		}
	}
	require.True(t, r.dialErr != "" || strings.Contains(r.out, "REPLY "), "the helper ran and reported:\n%s", r.out)
	return r
}

// TestPeerCredentialForbidden runs a client as uid 65534, which is neither
// root nor the daemon's uid, and checks that the daemon refuses it with
// reason forbidden. The socket's folder and file are opened up for the
// test so that only the SO_PEERCRED check stands between the peer and the
// daemon.
func TestPeerCredentialForbidden(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a child process under another uid")
	}
	d := startDaemon(t, nil)
	before := lastSequence(t, d)
	for _, p := range []string{d.dir, filepath.Dir(d.sock)} {
		require.NoError(t, os.Chmod(p, 0o755))
	}
	require.NoError(t, os.Chmod(d.sock, 0o666))

	res := runAsNobody(t, d.sock)
	require.Empty(t, res.dialErr, "the child must reach the socket:\n%s", res.out)
	require.NotEmpty(t, res.reply, "the daemon must answer the refused peer:\n%s", res.out)
	r := parseReply(t, []byte(res.reply))
	assertError(t, r, `null`, -32008, "forbidden")
	assert.Contains(t, r.err.Message, fmt.Sprintf("uid %d", nobody), "the refusal names the uid")
	assert.True(t, res.closedBy, "the daemon closes the refused connection:\n%s", res.out)

	// The refused peer changed nothing and the daemon still serves us.
	assert.Equal(t, before, lastSequence(t, d), "nothing appended for the refused peer")
	rc := d.raw(t)
	ok := rc.roundTrip(request("2", `{"action":"project_status","project":"intruder"}`))
	assertError(t, ok, `2`, -32001, "not_found")
}
