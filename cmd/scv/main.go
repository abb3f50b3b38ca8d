// Command scv is the ledger daemon and its command-line client.
//
//	scv daemon [--db PATH] [--socket PATH] [--stale-after D] [--heartbeat-every D]
//	scv version                              print the version
//	scv ledger verify --db PATH              check the hash chains of a database file
//	scv [--socket PATH] [--json] COMMAND     talk to a running daemon
//
// Run `scv help` for the client commands.
package main

import (
	"errors"
	"flag"
	"fmt"
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
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	var err error
	switch args[0] {
	case "daemon":
		err = runDaemon(args[1:], stderr)
	case "ledger":
		err = runLedger(&client{stdout: stdout, now: time.Now}, args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, version)
	case "help", "-h", "--help":
		usage(stdout)
	default:
		err = runClient(args, stdout, stderr)
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var x exitError
	if errors.As(err, &x) {
		if x.err != nil {
			fmt.Fprintln(stderr, "scv:", x.err)
		}
		return x.code
	}
	if err != nil {
		fmt.Fprintln(stderr, "scv:", err)
		var u usageError
		if errors.As(err, &u) {
			return 2
		}
		return 1
	}
	return 0
}

// usageError marks a command line that could not be understood.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: scv COMMAND

  daemon [--db PATH] [--socket PATH] [--stale-after 5m] [--heartbeat-every D]
         [--compact-after 10000] [--retain 1000] [--compact-drop]
         [--config FILE] [--notify CHANNEL:ACCOUNT] [--kill-grace 2s]
                                          run the daemon in the foreground
  version                                 print the version
  ledger verify [--db PATH] [--project P] [--head ID=HEX ...]
                                          check the database file's hash chains (no daemon needed)
  ledger verify --bundle FILE [--head ID=HEX ...]
                                          check an exported bundle (no database needed)
  ledger export [--db PATH] PROJECT [-o FILE]
                                          write a project's history as a self-verifying bundle
  ledger compact PROJECT [--retain K] [--drop]
                                          fold old events into a snapshot and the archive (through the daemon)

Client commands (global flags: --socket PATH or SCV_SOCKET, --json):
  status
  project create NAME [--workspace DIR]
  project status|tasks|report PROJECT [--at SEQ [--db PATH]]
                                          with --at: as of sequence SEQ, from the database file (no daemon needed)
  project events PROJECT [--after N] [--follow]
  project task add PROJECT TITLE [--depends-on ID ...] [--max-retries N]
  project task update PROJECT TASK STATUS [--progress TEXT]
  project run start PROJECT TASK --agent NAME
  project run progress PROJECT RUN TEXT
  project run finish PROJECT RUN succeeded|failed|cancelled
  project heartbeat PROJECT [--task T] [--run R]
  project run exec PROJECT TASK [--agent NAME] [--session S] [--heartbeat-every 30s] -- CMD ARGS...
                                          run CMD as a supervised run of TASK: heartbeats, progress
                                          lines ("progress: TEXT"), finish; exits with CMD's code
  delegate [--agent NAME] [--session S] -- CMD ARGS...
                                          run CMD as a delegation the daemon tracks; exits with CMD's code
  delegations [--all]                     list running delegations (--all: orphans too)
  delegations kill HANDLE | --orphans     stop a delegation's whole process tree
  channels                                list the channel accounts and their health
  channel set CHANNEL:ACCOUNT --enable|--disable [--workspace DIR] [--remote-tools none|owner]
              [--senders owner|anyone] [--purpose chat|mail]
                                          create or change a channel account
  channel logout CHANNEL:ACCOUNT          stop an account and remove its settings and state
  reload                                  reread the channel settings file
  chat [CHANNEL:ACCOUNT]                  the owner's chat (default local:owner): questions as they
                                          come, answered with yes/no on standard input
  confirm ask QUESTION [--timeout 30m]    ask the owner (the chat that started this delegation's work)
  confirm status ID                       where a question stands (asking keeps it alive)
  confirm list [--chat C] [--pending]     questions and who decided them
  confirm answer ID yes|no                answer a question
  restart-when-idle [--version V] [--commit C] [--max-wait 10m]
                                          restart the daemon into the release installed at its path,
                                          once this delegation ($SCV_PARENT) has ended
`)
}
