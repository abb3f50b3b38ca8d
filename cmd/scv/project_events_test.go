package main

import (
	"bytes"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe to read while another goroutine writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestEventsFollow: `scv project events P --follow` prints the history,
// then each event as it is appended, and ends cleanly on SIGINT.
func TestEventsFollow(t *testing.T) {
	sock := cliDaemon(t)
	cliOK(t, sock, "project", "create", "acme", "--workspace", t.TempDir())
	task := cliNewID(t, cliOK(t, sock, "project", "task", "add", "acme", "build"), "task", "added")

	for _, mode := range []string{"human", "json"} {
		t.Run(mode, func(t *testing.T) {
			args := []string{"--socket", sock, "project", "events", "acme", "--follow"}
			if mode == "json" {
				args = append(args, "--json")
			}
			history := strings.Count(cliOK(t, sock, "--json", "project", "events", "acme"), `"sequence"`)
			if mode == "human" {
				history++ // the header line
			}
			lines := func(s string) int { return strings.Count(s, "\n") }
			var out, errOut syncBuffer
			done := make(chan int, 1)
			go func() { done <- run(args, &out, &errOut) }()
			require.Eventually(t, func() bool { return lines(out.String()) == history },
				5*time.Second, 10*time.Millisecond, "the history first")
			assert.Contains(t, out.String(), "task_added")

			cliOK(t, sock, "project", "heartbeat", "acme", "--task", task)
			require.Eventually(t, func() bool { return lines(out.String()) == history+1 },
				5*time.Second, 10*time.Millisecond, "then what is appended")
			last := out.String()[strings.LastIndex(strings.TrimSuffix(out.String(), "\n"), "\n")+1:]
			assert.Contains(t, last, "heartbeat")
			if mode == "json" {
				assert.Contains(t, last, `"kind":"heartbeat"`)
			}
			// The polls between two events print neither twice.
			beats := strings.Count(out.String(), "heartbeat")
			cliOK(t, sock, "project", "heartbeat", "acme", "--task", task)
			require.Eventually(t, func() bool { return strings.Count(out.String(), "heartbeat") == beats+1 },
				5*time.Second, 10*time.Millisecond, "the second heartbeat")
			assert.Equal(t, history+2, lines(out.String()), "no event twice")

			require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGINT))
			select {
			case code := <-done:
				assert.Equal(t, 0, code, "stderr: %s", errOut.String())
			case <-time.After(5 * time.Second):
				t.Fatal("--follow did not end on SIGINT")
			}
		})
	}
}
