// Command scv is the ledger daemon and its command-line client.
//
//	scv daemon [flags]                     run the daemon in the foreground
//	scv project create|status|tasks|…      talk to a running daemon
//	scv ledger verify|export|compact|copy  the ledger's own tools
//	scv completion bash|zsh|fish           shell completion
//
// Every command answers --help; docs/cli.md has the command tree, the
// exit codes and the JSON error object.
package main

import (
	"io"
	"os"
	"time"
)

// version is stamped at build time with -ldflags "-X main.version=V".
var version = "0.0.0-dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one scv invocation and returns its exit code.
func run(args []string, stdout, stderr io.Writer) int {
	c := &client{streams: streams{stdin: os.Stdin, stdout: stdout, stderr: stderr}, now: time.Now}
	return c.execute(args)
}
