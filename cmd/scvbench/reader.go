package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"scv/control"
)

// The project_status reader under load runs in a process of its own, as
// the owner's `scv project status` or web page does: in the harness's
// process its goroutine would also wait behind the 256 client goroutines
// for the harness's share of the CPUs, and that wait is not the daemon's.
// The harness starts its own binary again with readerEnv set; main (and
// TestMain, for the test binary) hands over to readerMain.
const readerEnv = "SCVBENCH_STATUS_READER"

// startReader starts the reader process: it dials sock and sends
// project_status of project back to back until end, timing the requests
// that start at or after from and finish by end. wait returns their
// latencies.
func startReader(ctx context.Context, sock, project string, from, end time.Time) (wait func() ([]time.Duration, error), err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), readerEnv+"="+string(mustJSON(readerArgs{
		Sock: sock, Params: string(statusParams(project)), From: from.UnixNano(), End: end.UnixNano(),
	})))
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() ([]time.Duration, error) {
		if err := cmd.Wait(); err != nil {
			return nil, fmt.Errorf("status reader: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
		}
		var ns []int64
		if err := json.Unmarshal(out.Bytes(), &ns); err != nil {
			return nil, fmt.Errorf("status reader: %w", err)
		}
		lat := make([]time.Duration, len(ns))
		for i, n := range ns {
			lat[i] = time.Duration(n)
		}
		return lat, nil
	}, nil
}

// readerArgs is what the harness passes its reader process, in readerEnv.
type readerArgs struct {
	Sock, Params string
	From, End    int64 // Unix nanoseconds
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// readerMain is the reader process: it prints the latencies in
// nanoseconds as a JSON array, and returns the exit status.
func readerMain(arg string) int {
	var a readerArgs
	if err := json.Unmarshal([]byte(arg), &a); err != nil {
		fmt.Fprintln(os.Stderr, readerEnv+":", err)
		return 2
	}
	ctx := context.Background()
	c, err := control.Dial(ctx, a.Sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	from, end := time.Unix(0, a.From), time.Unix(0, a.End)
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
