package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"

	"scv/control/rpc"
)

// The project_status reader under load runs in a process of its own, as
// the owner's `scv project status` or web page does: in the harness's
// process its goroutine would also wait behind the 256 client goroutines
// for the harness's share of the CPUs, and that wait is not the daemon's.
// The harness starts its own binary again with readerEnv set; main (and
// TestMain, for the test binary) hands over to readerMain.
const readerEnv = "SCVBENCH_STATUS_READER"

// reader is a reader process, started and connected.
type reader struct {
	cmd         *exec.Cmd
	stdin       io.WriteCloser
	out, stderr bytes.Buffer
	copied      chan struct{} // closed once out holds all the process wrote
}

// startReader starts the reader process and waits until it has dialled
// sock: a process started on a loaded machine (the race detector's
// binary, under 256 clients) may take longer than a short window to come
// up, and the window is set only once it is ready (begin).
func startReader(ctx context.Context, sock, project string) (*reader, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r := &reader{cmd: exec.CommandContext(ctx, exe)}
	r.cmd.Env = append(os.Environ(), readerEnv+"="+string(mustJSON(readerArgs{Sock: sock, Params: string(statusParams(project))})))
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	r.cmd.Stderr = &r.stderr
	if err := r.cmd.Start(); err != nil {
		return nil, err
	}
	br := bufio.NewReader(stdout)
	if line, err := br.ReadString('\n'); err != nil || line != readerReady+"\n" {
		r.stdin.Close()
		r.cmd.Wait()
		return nil, fmt.Errorf("status reader: not ready (%q, %v): %s", line, err, bytes.TrimSpace(r.stderr.Bytes()))
	}
	r.copied = make(chan struct{})
	go func() {
		defer close(r.copied)
		io.Copy(&r.out, br)
	}()
	return r, nil
}

// readerReady is the line the reader process writes once it has dialled.
const readerReady = "ready"

// begin tells the reader its window: it sends project_status back to
// back until end, timing the requests that start at or after from and
// finish by end. wait returns their latencies.
func (r *reader) begin(from, end time.Time) (wait func() ([]time.Duration, error)) {
	fmt.Fprintf(r.stdin, "%d %d\n", from.UnixNano(), end.UnixNano())
	r.stdin.Close()
	return func() ([]time.Duration, error) {
		<-r.copied // before Wait, which closes the pipe
		if err := r.cmd.Wait(); err != nil {
			return nil, fmt.Errorf("status reader: %w: %s", err, bytes.TrimSpace(r.stderr.Bytes()))
		}
		var ns []int64
		if err := json.Unmarshal(r.out.Bytes(), &ns); err != nil {
			return nil, fmt.Errorf("status reader: %w", err)
		}
		lat := make([]time.Duration, len(ns))
		for i, n := range ns {
			lat[i] = time.Duration(n)
		}
		return lat, nil
	}
}

// readerArgs is what the harness passes its reader process, in readerEnv;
// the window comes on its standard input once it is ready.
type readerArgs struct {
	Sock, Params string
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// readerMain is the reader process: it dials, says it is ready, reads
// its window, then prints the latencies in nanoseconds as a JSON array,
// and returns the exit status.
func readerMain(arg string) int {
	var a readerArgs
	if err := json.Unmarshal([]byte(arg), &a); err != nil {
		fmt.Fprintln(os.Stderr, readerEnv+":", err)
		return 2
	}
	ctx := context.Background()
	c, err := rpc.Dial(ctx, a.Sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	fmt.Fprintln(os.Stdout, readerReady)
	var fromNs, endNs int64
	if _, err := fmt.Fscan(os.Stdin, &fromNs, &endNs); err != nil {
		fmt.Fprintln(os.Stderr, "status reader: the window:", err)
		return 2
	}
	from, end := time.Unix(0, fromNs), time.Unix(0, endNs)
	conn := &conn{c: c}
	ns := []int64{}
	for {
		t := time.Now()
		if !t.Before(end) {
			break
		}
		if _, err := conn.call(ctx, []byte(a.Params)); err != nil {
			fmt.Fprintln(os.Stderr, "project_status:", err)
			return 1
		}
		if done := time.Now(); !t.Before(from) && !done.After(end) {
			ns = append(ns, done.Sub(t).Nanoseconds())
		}
	}
	b := []byte{'['}
	for i, n := range ns {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, n, 10)
	}
	os.Stdout.Write(append(b, ']', '\n'))
	return 0
}
