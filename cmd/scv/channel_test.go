package main

import (
	"fmt"
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

// TestEmailPasswordNeverShown runs the daemon as a process, its log (JSON
// lines) in a file, with an email account from the settings file (its
// password read from password_file), then sets a second password with
// scv channel login from standard input, and does all it can with them:
// reload, status, channel list (also --json), refused logins (also one
// whose URL holds the password), a logout. Neither password is in any
// output, error or the daemon's log file; the log does speak of the
// account.
func TestEmailPasswordNeverShown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	const fromFile, fromStdin = "f1le-Pa55word-hunter2", "std1n-Pa55word-hunter3"
	dir := shortDir(t)
	bin := buildScv(t, dir, "password-test")
	sock, db, config := filepath.Join(dir, "d.sock"), filepath.Join(dir, "l.db"), filepath.Join(dir, "channels.json")
	pass := filepath.Join(dir, "work.pass")
	require.NoError(t, os.WriteFile(pass, []byte(fromFile+"\n"), 0o600))
	require.NoError(t, os.WriteFile(config, fmt.Appendf(nil, `{"accounts":[
		{"channel":"local","account":"mail","purpose":"mail"},
		{"channel":"email","account":"work","email":{"imap":"imaps://mail.example.com","user":"me@example.com","password_file":%q,"mail_chat":"local:mail"}}
	]}`, pass), 0o600))

	logPath := filepath.Join(dir, "daemon.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	defer logFile.Close()
	daemon := exec.Command(bin, "--json", "daemon", "--db", db, "--socket", sock, "--config", config)
	daemon.Stderr = logFile
	require.NoError(t, daemon.Start())
	stopped := false
	defer func() {
		if !stopped {
			daemon.Process.Kill()
			daemon.Wait()
		}
	}()

	var outputs []string
	scv := func(stdin string, wantCode int, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--socket", sock}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else {
			require.NoError(t, err)
		}
		assert.Equal(t, wantCode, code, "scv %s: %s", strings.Join(args, " "), stderr.String())
		outputs = append(outputs, stdout.String(), stderr.String())
		return stdout.String() + stderr.String()
	}
	require.Eventually(t, func() bool {
		return exec.Command(bin, "--socket", sock, "status").Run() == nil
	}, 20*time.Second, 20*time.Millisecond, "the daemon did not answer")

	scv("", 0, "reload")
	assert.Contains(t, scv("", 0, "channel", "list"), "imaps://mail.example.com")
	scv("", 0, "--json", "channel", "list")
	scv("", 0, "status")
	scv("", 0, "--json", "status")
	scv("", 0, "channels")

	out := scv(fromStdin+"\n", 0, "channel", "login", "email:work", "--imap", "imap://127.0.0.1:1143", "--user", "you", "--password-file", "-")
	assert.Contains(t, out, "imap://127.0.0.1:1143")
	scv("", 0, "--json", "channel", "list")
	scv(fromStdin, 1, "channel", "login", "email:work", "--imap", "imaps://me:"+fromStdin+"@mail.example.com", "--user", "me", "--password-file", "-")
	scv(fromStdin, 1, "--json", "channel", "login", "email:home", "--imap", "imaps://mail.example.com", "--user", "me", "--password-file", "-", "--mail-chat", "local:nope")
	scv(fromStdin, 1, "channel", "login", "wechat:main", "--imap", "imaps://mail.example.com", "--user", "me", "--password-file", "-")
	scv("", 1, "channel", "login", "email:work", "--imap", "imaps://mail.example.com", "--user", "me", "--password-file", filepath.Join(dir, "nope"))
	scv("", 0, "reload") // the file's password again
	scv("", 0, "channel", "logout", "email:work")
	scv("", 0, "--json", "status")

	require.NoError(t, daemon.Process.Signal(syscall.SIGTERM))
	require.NoError(t, daemon.Wait())
	stopped = true
	log, err := os.ReadFile(logPath)
	require.NoError(t, err)
	assert.Contains(t, string(log), "email:work", "the log speaks of the account")
	for _, secret := range []string{fromFile, fromStdin} {
		assert.NotContains(t, string(log), secret, "the daemon's log")
		for i, o := range outputs {
			assert.NotContains(t, o, secret, "output %d", i)
		}
	}
}
