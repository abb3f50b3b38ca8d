package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
)

// The do-nothing responder is the floor under the project_status figure:
// a process of its own that answers every request line on a Unix socket
// with the same bytes as the daemon's project_status reply, doing no
// work to make them. The status reader (reader.go) asks it back to back,
// in a window of its own, while the same 256 clients write to the daemon.
// Its round trip is what the machine charges any server under that load:
// the responder's wake-up and the reader's, on two CPUs the writers keep
// busy. What the daemon's project_status takes beyond it is the daemon's.
const responderEnv = "SCVBENCH_RESPONDER"

// responderArgs is what the harness passes its responder, in responderEnv.
type responderArgs struct {
	Sock   string
	Result string // the JSON of the result every reply carries
}

// startResponder starts the responder on a socket in dir, answering with
// result, and returns the socket's path and a function that stops it.
func startResponder(ctx context.Context, dir string, result []byte) (sock string, stop func() error, err error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	sock = filepath.Join(dir, "responder.sock")
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), responderEnv+"="+string(mustJSON(responderArgs{Sock: sock, Result: string(result)})))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	// It stops when its stdin closes.
	stop = func() error {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("responder: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
		}
		return nil
	}
	// It prints a line once it listens.
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		return "", nil, errors.Join(fmt.Errorf("responder did not start: %w", err), stop())
	}
	return sock, stop, nil
}

// responderMain is the responder process; it returns the exit status.
func responderMain(arg string) int {
	var a responderArgs
	if err := json.Unmarshal([]byte(arg), &a); err != nil {
		fmt.Fprintln(os.Stderr, responderEnv+":", err)
		return 2
	}
	if !json.Valid([]byte(a.Result)) {
		fmt.Fprintln(os.Stderr, responderEnv+": the result is not JSON")
		return 2
	}
	ln, err := net.Listen("unix", a.Sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("listening")
	go func() {
		io.Copy(io.Discard, os.Stdin)
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return 0
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go respond(c, []byte(a.Result))
	}
}

// respond answers each request line on c with result, under the line's
// id, until c ends or a line is not one the harness writes.
func respond(c net.Conn, result []byte) {
	defer c.Close()
	r := bufio.NewReader(c)
	var out []byte
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		id, ok := requestID(line)
		if !ok {
			fmt.Fprintf(os.Stderr, "responder: not a request line: %.100s\n", line)
			return
		}
		out = append(out[:0], `{"jsonrpc":"2.0","id":`...)
		out = append(out, id...)
		out = append(out, `,"result":`...)
		out = append(out, result...)
		out = append(out, "}\n"...)
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// requestID is the id of a request line as conn.call writes them:
// `{"jsonrpc":"2.0","id":N,"method":…`.
func requestID(line []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(line, []byte(`{"jsonrpc":"2.0","id":`))
	if !ok {
		return nil, false
	}
	i := bytes.IndexByte(rest, ',')
	if i <= 0 {
		return nil, false
	}
	return rest[:i], true
}

// resultOf is the result of a reply line that conn.call returned:
// `{"jsonrpc":"2.0","id":N,"result":R}`.
func resultOf(reply []byte) ([]byte, error) {
	_, r, ok := bytes.Cut(reply, []byte(`,"result":`))
	r, ok2 := bytes.CutSuffix(bytes.TrimSpace(r), []byte("}"))
	if !ok || !ok2 || !json.Valid(r) {
		return nil, fmt.Errorf("not a result: %.200s", reply)
	}
	return r, nil
}
