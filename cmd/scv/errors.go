package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"scv/control/api"
	"scv/control/follow"
	"scv/control/rpc"
	"scv/control/supervise"
)

// Exit codes of scv (docs/cli.md). Commands that run another command
// (`delegate`, `project run exec`) exit with its code instead, and with
// supervise.ExitFailed or supervise.ExitNotFound when it did not run.
const (
	exitOK          = 0 // done; a question answered yes
	exitRefused     = 1 // the daemon (or the ledger file) refused, or the work failed; a question answered no
	exitUsage       = 2 // the command line was not understood: nothing was sent
	exitUnavailable = 3 // the daemon could not be reached, stopped while answering, or said unavailable
	exitVerify      = 4 // ledger verify found problems
	exitExpired     = 5 // a question expired without an answer
	exitQFailed     = 6 // a question failed: no chat could take it, or the daemon restarted
	exitWithdrawn   = 7 // a question was withdrawn: nobody followed it
	exitPending     = 8 // confirm status: the question is still pending
	// project task next: no task is ready (the daemon's nothing_ready).
	exitNothingReady = 9
	// agent start: the command is not on the PATH, as for delegate.
	exitNotFound = supervise.ExitNotFound
)

// Reasons scv gives to errors it found itself, beside the daemon's own
// (`not_found`, `conflict`, …) in the JSON error object.
const (
	reasonUsage       = "usage"
	reasonUnreachable = "unreachable"
	reasonVerify      = "verify_failed"
	reasonError       = "error"
)

// usageError marks a command line that could not be understood; cmd, when
// set, is the command whose usage to point at.
type usageError struct {
	msg string
}

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// daemonError is an error the daemon answered with, shown as
// `message [reason]`.
type daemonError struct{ e *api.Error }

func (d daemonError) Error() string { return fmt.Sprintf("%s [%s]", d.e.Message, d.e.Data.Reason) }

func (d daemonError) Unwrap() error { return d.e }

// verifyError: ledger verify found problems (printed already).
type verifyError struct{ first string }

func (e verifyError) Error() string { return "ledger verify: " + e.first }

// exitError ends scv with code, printing err first unless it is nil.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e exitError) Unwrap() error { return e.err }

// saidError is err said in other words; its kind is err's.
type saidError struct {
	msg string
	err error
}

func (e saidError) Error() string { return e.msg }

func (e saidError) Unwrap() error { return e.err }

// failure is an error as scv reports it: the exit code, and the JSON
// error object printed under --json.
type failure struct {
	Exit int `json:"exit"`
	// Code is the daemon's JSON-RPC code; for a daemon that could not
	// be reached, unavailable's; 0 when scv found the error itself.
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// classify tells what err means for the exit code and the error object.
func classify(err error) failure {
	var (
		u  usageError
		un *rpc.UnreachableError
		aw *follow.AwayError
		d  daemonError
		v  verifyError
		x  exitError
		ce *api.Error
	)
	switch {
	case errors.As(err, &x) && !errors.As(x.err, &d):
		f := failure{Exit: x.code, Reason: reasonError}
		if x.err != nil {
			f.Message = x.err.Error()
			if inner := classify(x.err); inner.Reason != reasonError {
				f.Code, f.Reason = inner.Code, inner.Reason
			}
		}
		return f
	case errors.As(err, &u):
		return failure{Exit: exitUsage, Reason: reasonUsage, Message: u.msg}
	case errors.As(err, &aw): // a follow whose daemon did not come back
		return failure{Exit: exitUnavailable, Code: api.CodeUnavailable, Reason: reasonUnreachable, Message: aw.Error()}
	case errors.As(err, &un):
		return failure{Exit: exitUnavailable, Code: api.CodeUnavailable, Reason: reasonUnreachable, Message: un.Msg}
	case errors.As(err, &v):
		return failure{Exit: exitVerify, Reason: reasonVerify, Message: err.Error()}
	case errors.As(err, &d):
		f := failure{Exit: exitRefused, Code: d.e.Code, Reason: d.e.Data.Reason, Message: d.e.Message}
		if d.e.Data.Reason == api.ReasonUnavailable {
			f.Exit = exitUnavailable
		}
		if errors.As(err, &x) {
			f.Exit = x.code
		}
		return f
	case errors.As(err, &ce):
		return classify(daemonError{ce})
	}
	// An error of the ledger file or of this machine: the daemon's
	// mapping names its kind (not_found, invalid_argument, …).
	e := api.ErrorOf(err)
	f := failure{Exit: exitRefused, Reason: reasonError, Message: err.Error()}
	if e.Data.Reason != api.ReasonInternal {
		f.Code, f.Reason = e.Code, e.Data.Reason
		if e.Data.Reason == api.ReasonUnavailable {
			f.Exit = exitUnavailable
		}
	}
	return f
}

// report prints err on stderr, as text or, under --json, as one JSON
// object, and returns the exit code.
func report(stderr io.Writer, err error, asJSON bool, hint string) int {
	f := classify(err)
	if f.Message == "" && f.Exit != exitUsage {
		return f.Exit // the code says it all (a command's own exit status)
	}
	if asJSON {
		b, _ := json.Marshal(f)
		fmt.Fprintf(stderr, "%s\n", b)
		return f.Exit
	}
	fmt.Fprintln(stderr, "scv:", err)
	if f.Exit == exitUsage && hint != "" {
		fmt.Fprintln(stderr, hint)
	}
	return f.Exit
}

// callError turns what a call returned into the error scv reports: the
// daemon's refusal, or a daemon that could not be reached or hung up
// before the reply (the request was then not executed, as the protocol
// promises).
func callError(err error) error {
	var e *api.Error
	if errors.As(err, &e) {
		return daemonError{e}
	}
	return err
}
