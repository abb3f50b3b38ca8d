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
// process of TestPeerCredentialForbidden: it connects to that socket and
// prints the first line the daemon sends.
const peerSocketEnv = "SCV_TEST_PEER_SOCKET"

// nobody is the uid and gid the child runs as: neither root nor the
// daemon's own.
const nobody = 65534

// TestPeerCredentialHelper is not a test on its own: it is the child
// process of TestPeerCredentialForbidden.
func TestPeerCredentialHelper(t *testing.T) {
	sock := os.Getenv(peerSocketEnv)
	if sock == "" {
		t.Skip("helper process for TestPeerCredentialForbidden")
	}
	c, err := net.DialTimeout("unix", sock, ioTimeout)
	if err != nil {
		fmt.Printf("DIAL-ERROR %v\n", err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	// The daemon may refuse before reading anything; the write may fail.
	c.Write([]byte(request("1", `{"action":"status"}`) + "\n"))
	line, err := bufio.NewReader(c).ReadBytes('\n')
	fmt.Printf("REPLY %s", line)
	if len(line) == 0 || line[len(line)-1] != '\n' {
		fmt.Println()
	}
	// After the refusal the daemon closes the connection: end of file, or
	// a reset because it never read what we wrote.
	_, err = c.Read(make([]byte, 1))
	fmt.Printf("AFTER %v\n", errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET))
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
	for _, p := range []string{d.dir, filepath.Dir(d.sock)} {
		require.NoError(t, os.Chmod(p, 0o755))
	}
	require.NoError(t, os.Chmod(d.sock, 0o666))

	// The test binary may sit in a folder only we can read: run a copy.
	self, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(d.dir, "peer.test")
	data, err := os.ReadFile(self)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, data, 0o755))

	cmd := exec.Command(bin, "-test.run=^TestPeerCredentialHelper$", "-test.v", "-test.count=1")
	cmd.Dir = d.dir
	cmd.Env = append(os.Environ(), peerSocketEnv+"="+d.sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("cannot run a process as uid %d here: %v", nobody, err)
		}
		require.NoError(t, err, "helper output:\n%s", out.String())
	}
	require.NotContains(t, out.String(), "DIAL-ERROR", "the child must reach the socket:\n%s", out.String())

	var replyLine string
	for _, l := range strings.Split(out.String(), "\n") {
		if s, ok := strings.CutPrefix(l, "REPLY "); ok {
			replyLine = s
		}
	}
	require.NotEmpty(t, replyLine, "the daemon must answer the refused peer:\n%s", out.String())
	r := parseReply(t, []byte(replyLine))
	assertError(t, r, `null`, -32008, "forbidden")
	assert.Contains(t, out.String(), "AFTER true", "the daemon closes the refused connection")

	// The refused peer changed nothing and the daemon still serves us.
	rc := d.raw(t)
	ok := rc.roundTrip(request("2", `{"action":"status"}`))
	assert.Nil(t, ok.err)
}
