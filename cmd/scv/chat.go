package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"scv/control"
	"scv/control/proc"
)

// DefaultChat is the owner's chat on this machine, which `scv chat` opens.
const DefaultChat = "local:owner"

// chatWait is how long one confirm_list of `scv chat` waits for news.
const chatWait = 25 // seconds, under callTimeout and control.MaxListWait

func init() { leaves = append(leaves, channelLeaves...) }

// channelLeaves are `scv channel …`, `scv reload` and `scv confirm …`,
// after the commands of cli.go.
var channelLeaves = []*leaf{
	{
		name: "channel set", args: []string{"CHANNEL:ACCOUNT"},
		use: "CHANNEL:ACCOUNT --enable|--disable [--workspace DIR] [--remote-tools none|owner] [--senders owner|anyone] [--purpose chat|mail]",
		setup: func(fs *flag.FlagSet) func([]string) (control.Command, error) {
			enable := fs.Bool("enable", false, "run the account")
			disable := fs.Bool("disable", false, "stop the account, keeping its settings")
			ws := fs.String("workspace", "", "the account's workspace `DIR` (default: keep the saved one)")
			tools := fs.String("remote-tools", "", "who may use tools remotely: `none` or owner (default: keep)")
			senders := fs.String("senders", "", "whose messages it answers: `owner` or anyone (default: keep)")
			purpose := fs.String("purpose", "", "what it carries: `chat` or mail (default: keep)")
			return func(pos []string) (control.Command, error) {
				channel, account, err := chatID(pos[0])
				if err != nil {
					return nil, err
				}
				if *enable == *disable {
					return nil, errors.New("give one of --enable and --disable")
				}
				c := control.CmdChannelSet{Channel: channel, Account: account, Enabled: *enable}
				if isSet(fs, "workspace") {
					c.Workspace = ws
				}
				if isSet(fs, "remote-tools") {
					var v control.RemoteTools
					if err := v.UnmarshalText([]byte(*tools)); err != nil {
						return nil, fmt.Errorf("--remote-tools: %w", err)
					}
					c.RemoteTools = &v
				}
				if isSet(fs, "senders") {
					var v control.Senders
					if err := v.UnmarshalText([]byte(*senders)); err != nil {
						return nil, fmt.Errorf("--senders: %w", err)
					}
					c.Senders = &v
				}
				if isSet(fs, "purpose") {
					var v control.Purpose
					if err := v.UnmarshalText([]byte(*purpose)); err != nil {
						return nil, fmt.Errorf("--purpose: %w", err)
					}
					c.Purpose = &v
				}
				return c, nil
			}
		},
		print: printComponentsReply,
	},
	{
		name: "channel logout", args: []string{"CHANNEL:ACCOUNT"},
		setup: func(*flag.FlagSet) func([]string) (control.Command, error) {
			return func(pos []string) (control.Command, error) {
				channel, account, err := chatID(pos[0])
				if err != nil {
					return nil, err
				}
				return control.CmdChannelLogout{Channel: channel, Account: account}, nil
			}
		},
		print: printComponentsReply,
	},
	{
		name: "channels",
		setup: func(*flag.FlagSet) func([]string) (control.Command, error) {
			return func([]string) (control.Command, error) { return control.CmdStatus{}, nil }
		},
		print: printComponentsReply,
	},
	{
		name: "reload",
		setup: func(*flag.FlagSet) func([]string) (control.Command, error) {
			return func([]string) (control.Command, error) { return control.CmdReload{}, nil }
		},
		print: printComponentsReply,
	},
	{
		name: "confirm ask", args: []string{"QUESTION"}, use: "QUESTION [--timeout 30m]",
		setup: func(fs *flag.FlagSet) func([]string) (control.Command, error) {
			timeout := fs.Duration("timeout", 0, "how long no answer waits before it counts as no (default: the daemon's, 30m)")
			return func(pos []string) (control.Command, error) {
				c := control.CmdConfirmAsk{Question: pos[0]}
				// Inside a delegation, the chat that started its work is asked.
				if parent := os.Getenv(proc.ParentEnv); parent != "" {
					c.Parent = &parent
				}
				if isSet(fs, "timeout") {
					if *timeout <= 0 {
						return nil, errors.New("--timeout must be positive")
					}
					secs := uint64(timeout.Round(time.Second) / time.Second)
					c.TimeoutSeconds = &secs
				}
				return c, nil
			}
		},
		print: printConfirmReply,
	},
	{
		name: "confirm status", args: []string{"ID"},
		setup: func(*flag.FlagSet) func([]string) (control.Command, error) {
			return func(pos []string) (control.Command, error) { return control.CmdConfirmStatus{ID: pos[0]}, nil }
		},
		print: printConfirmReply,
	},
	{
		name: "confirm answer", args: []string{"ID", "ANSWER"}, use: "ID yes|no",
		setup: func(*flag.FlagSet) func([]string) (control.Command, error) {
			return func(pos []string) (control.Command, error) {
				if pos[1] != "yes" && pos[1] != "no" {
					return nil, fmt.Errorf("ANSWER %q: want yes or no", pos[1])
				}
				return control.CmdConfirmAnswer{ID: pos[0], Answer: pos[1]}, nil
			}
		},
		print: printConfirmReply,
	},
	{
		name: "confirm list", use: "[--chat CHANNEL:ACCOUNT] [--pending]",
		setup: func(fs *flag.FlagSet) func([]string) (control.Command, error) {
			chat := fs.String("chat", "", "only the questions of this chat")
			pending := fs.Bool("pending", false, "only the questions still waiting for an answer")
			return func([]string) (control.Command, error) {
				c := control.CmdConfirmList{}
				if *chat != "" {
					c.Chat = chat
				}
				return confirmList{c, *pending}, nil
			}
		},
		print: func(w io.Writer, st *control.DaemonStatus, cmd control.Command, now time.Time) error {
			qs := st.Questions
			if l, ok := cmd.(confirmList); ok && l.pendingOnly {
				qs = pendingOf(qs)
			}
			return printQuestions(w, qs, now)
		},
	},
}

// confirmList is `scv confirm list`: the command, and whether only pending
// questions are printed.
type confirmList struct {
	control.CmdConfirmList
	pendingOnly bool
}

func pendingOf(qs []control.Question) []control.Question {
	var out []control.Question
	for _, q := range qs {
		if q.State == control.ConfirmPending {
			out = append(out, q)
		}
	}
	return out
}

// chatID splits `<channel>:<account>`.
func chatID(s string) (channel, account string, err error) {
	channel, account, ok := strings.Cut(s, ":")
	if !ok {
		return "", "", fmt.Errorf("%q: want CHANNEL:ACCOUNT, such as local:owner", s)
	}
	return channel, account, nil
}

// printComponentsReply is the reply to the channel commands: every
// account's health.
func printComponentsReply(w io.Writer, st *control.DaemonStatus, _ control.Command, now time.Time) error {
	if len(st.Components) == 0 {
		_, err := fmt.Fprintln(w, "no channel accounts")
		return err
	}
	tw := newTable(w)
	row(tw, "ACCOUNT", "ENABLED", "STATE", "TOOLS", "SENDERS", "RESTARTS", "LAST SUCCESS", "ERROR")
	for _, c := range st.Components {
		senders := "-"
		if c.Senders != nil {
			senders = string(*c.Senders)
		}
		row(tw, clean(c.ID, 0), fmt.Sprint(c.Enabled), string(c.State), string(c.RemoteTools), senders,
			fmt.Sprint(c.Restarts), stampPtr(c.LastSuccessUnixSeconds, now), orDash(c.Error, 60))
	}
	return tw.Flush()
}

// printConfirmReply is the reply to confirm ask, status and answer.
func printConfirmReply(w io.Writer, st *control.DaemonStatus, _ control.Command, now time.Time) error {
	q := st.Confirm
	if q == nil {
		return errors.New("the daemon's reply carries no question")
	}
	chat := q.Chat
	if chat == "" {
		chat = "no chat"
	}
	_, err := fmt.Fprintf(w, "question %s %s in %s, deadline %s\n", q.ID, q.State, clean(chat, 0), stamp(q.DeadlineUnixSeconds, now))
	return err
}

// printQuestions is `scv confirm list`.
func printQuestions(w io.Writer, qs []control.Question, now time.Time) error {
	if len(qs) == 0 {
		_, err := fmt.Fprintln(w, "no questions")
		return err
	}
	tw := newTable(w)
	row(tw, "ID", "STATE", "CHAT", "ASKED", "DEADLINE", "DECIDED BY", "QUESTION")
	for _, q := range qs {
		row(tw, q.ID, string(q.State), orDash(&q.Chat, 0), age(now.Sub(time.Unix(int64(q.AskedUnixSeconds), 0))),
			localTime(q.DeadlineUnixSeconds), orDash(q.DecidedBy, 40), clean(q.Question, 80))
	}
	return tw.Flush()
}

// runChat is `scv chat [CHANNEL:ACCOUNT]`: the owner's chat in a
// terminal. It shows the chat's pending questions, then every question and
// every outcome as it arrives, and takes answers from standard input:
// `yes` or `no` answers the latest pending question, `ID yes|no` a given
// one. It ends at the end of input or on SIGINT.
func (c *client) runChat(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("scv chat", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.globalFlags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil || len(pos) > 1 {
		return usageError{"usage: scv chat [CHANNEL:ACCOUNT]   (default " + DefaultChat + ")"}
	}
	chat := DefaultChat
	if len(pos) == 1 {
		if _, _, err := chatID(pos[0]); err != nil {
			return usageError{err.Error()}
		}
		chat = pos[0]
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	st, err := c.do(control.CmdStatus{})
	if err != nil {
		return err
	}
	connected := false
	for _, comp := range st.Components {
		connected = connected || (comp.ID == chat && comp.State == control.ComponentConnected)
	}
	if !connected {
		fmt.Fprintf(stderr, "scv: %s is not connected, so questions do not come here; `scv channel set %s --enable` turns it on\n", chat, chat)
	}
	fmt.Fprintf(stdout, "chat %s: answer with yes or no (the latest question), or ID yes|no\n", chat)

	v := &chatView{c: c, chat: chat, out: stdout, errs: stderr, shown: map[string]control.ConfirmState{}}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	news := make(chan chatNews)
	failed := make(chan error, 1)
	go v.follow(ctx, news, failed)
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-failed:
			return err
		case qs := <-news:
			v.show(qs)
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			v.answer(line)
		}
	}
}

// chatView is what `scv chat` has shown.
type chatView struct {
	c         *client
	chat      string
	out, errs io.Writer
	shown     map[string]control.ConfirmState
	latest    string // the latest question shown while pending
}

// chatNews is one answer of the daemon: the questions that changed, and
// whether it is the first look.
type chatNews struct {
	questions []control.Question
	first     bool
}

// follow sends the chat's questions as they change, from the beginning.
func (v *chatView) follow(ctx context.Context, news chan<- chatNews, failed chan<- error) {
	cl, err := control.Dial(ctx, v.c.socket)
	if err != nil {
		failed <- v.c.dialError(err)
		return
	}
	defer cl.Close()
	var after uint64
	wait := uint64(0) // the first look does not wait
	for first := true; ; first = false {
		st, err := cl.Call(ctx, control.CmdConfirmList{Chat: &v.chat, After: &after, WaitSeconds: &wait})
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failed <- callError(err)
			return
		}
		for _, q := range st.Questions {
			after = max(after, q.Seq)
		}
		select {
		case news <- chatNews{st.Questions, first}:
		case <-ctx.Done():
			return
		}
		wait = chatWait
	}
}

// show prints what is new: a question when it is asked, its outcome once
// decided. The first look shows only the questions still pending.
func (v *chatView) show(n chatNews) {
	for _, q := range n.questions {
		before, seen := v.shown[q.ID]
		v.shown[q.ID] = q.State
		switch {
		case q.State == control.ConfirmPending:
			if !seen {
				fmt.Fprintf(v.out, "? %s  %s\n  (yes/no until %s)\n", q.ID, clean(q.Question, 0), localTime(q.DeadlineUnixSeconds))
				v.latest = q.ID
			}
		case n.first || (seen && before == q.State):
		default:
			by := ""
			if q.DecidedBy != nil {
				by = " (" + clean(*q.DecidedBy, 0) + ")"
			}
			fmt.Fprintf(v.out, "= %s  %s%s\n", q.ID, q.State, by)
		}
	}
}

// answer sends one line of the owner's input.
func (v *chatView) answer(line string) {
	f := strings.Fields(line)
	var id, ans string
	switch {
	case len(f) == 1 && (f[0] == "yes" || f[0] == "no"):
		id, ans = v.latest, f[0]
	case len(f) == 2 && (f[1] == "yes" || f[1] == "no"):
		id, ans = f[0], f[1]
	case len(f) == 0:
		return
	default:
		fmt.Fprintln(v.errs, "scv: answer with yes or no, or ID yes|no")
		return
	}
	if id == "" {
		fmt.Fprintln(v.errs, "scv: no question to answer")
		return
	}
	st, err := v.c.do(control.CmdConfirmAnswer{ID: id, Answer: ans})
	if err != nil {
		fmt.Fprintf(v.errs, "scv: %v\n", err)
		return
	}
	fmt.Fprintf(v.out, "answered %s %s\n", st.Confirm.ID, st.Confirm.State)
}
