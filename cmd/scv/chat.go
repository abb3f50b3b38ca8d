package main

import (
	"bufio"
	"context"
	"fmt"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/control/follow"
	"scv/control/render"
)

// DefaultChat is the owner's chat on this machine, which `scv chat` opens.
const DefaultChat = "local:owner"

// chatWait is how long one confirm_list of `scv chat` waits for news.
const chatWait = 25

// ChatOptions is `scv chat`.
type ChatOptions struct {
	c    *client
	Chat string
}

func newChatCmd(c *client) *cobra.Command {
	o := &ChatOptions{c: c, Chat: DefaultChat}
	return &cobra.Command{
		Use:   "chat [CHANNEL:ACCOUNT]",
		Short: "The owner's chat: questions as they come, answered yes or no",
		Long: `Open the owner's chat in this terminal (default local:owner, which
scv channel set local:owner --enable turns on): it shows the pending
questions, then every question and outcome as it comes, and takes answers
on standard input: yes or no answers the latest question, "ID yes|no" a
given one. It ends at the end of input or on Ctrl-C (exit 0). When the
daemon goes away it says so on stderr and waits for it, as long as a
minute (then it ends, exit 3), and goes on where it was. With --json it
prints each question as a JSON line.`,
		Example: `  scv chat
  scv chat local:owner`,
		Args:              rangeArgs(0, "CHANNEL:ACCOUNT"),
		ValidArgsFunction: c.completeChats,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if _, _, err := api.ParseChat(args[0]); err != nil {
					return usageError{err.Error()}
				}
				o.Chat = args[0]
			}
			return o.run()
		},
	}
}

func (o *ChatOptions) run() error {
	c, chat := o.c, o.Chat
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	st, err := c.do(api.CmdStatus{})
	if err != nil {
		return err
	}
	connected := false
	for _, comp := range st.Components {
		connected = connected || (comp.ID == chat && comp.State == api.ComponentConnected)
	}
	if !connected {
		c.note("%s is not connected, so questions do not come here; `scv channel set %s --enable` turns it on", chat, chat)
	}
	if !c.json {
		fmt.Fprintf(c.stdout, "chat %s: answer with yes or no (the latest question), or ID yes|no\n", chat)
	}

	v := &chatView{c: c, p: c.printer(), chat: chat, shown: map[string]api.ConfirmState{}}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(c.stdin)
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
		case n := <-news:
			if n.note != "" {
				c.note("%s", n.note)
			} else {
				v.show(n)
			}
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
	c      *client
	p      *printer
	chat   string
	shown  map[string]api.ConfirmState
	latest string // the latest question shown while pending
}

// chatNews is one answer of the daemon: the questions that changed, and
// whether it is the first look; or a note on the daemon.
type chatNews struct {
	questions []api.Question
	first     bool
	note      string
}

// follow sends the chat's questions as they change, from the beginning,
// and the notes on the daemon going away and coming back; then the end
// of the follow (control/follow) on failed.
func (v *chatView) follow(ctx context.Context, news chan<- chatNews, failed chan<- error) {
	send := func(n chatNews) bool {
		select {
		case news <- n:
			return true
		case <-ctx.Done():
			return false
		}
	}
	note := func(format string, a ...any) { send(chatNews{note: fmt.Sprintf(format, a...)}) }
	var after uint64
	wait := uint64(0) // the first look does not wait
	first := true
	err := v.c.follow(ctx, &follow.Follower{
		Request: func() api.Command {
			after, wait := after, wait
			return api.CmdConfirmList{Chat: &v.chat, After: &after, WaitSeconds: &wait}
		},
		Reply: func(st *api.DaemonStatus) (follow.Step, error) {
			for _, q := range st.Questions {
				after = max(after, q.Seq)
			}
			if !send(chatNews{questions: st.Questions, first: first}) {
				return follow.Stop, nil
			}
			first, wait = false, chatWait
			return follow.Now, nil
		},
		Back: func() { note("the daemon answers again") },
	}, note)
	if ctx.Err() == nil {
		failed <- err
	}
}

// show prints what is new: a question when it is asked, its outcome once
// decided. The first look shows only the questions still pending.
func (v *chatView) show(n chatNews) {
	out := v.c.stdout
	for _, q := range n.questions {
		before, seen := v.shown[q.ID]
		v.shown[q.ID] = q.State
		news := false
		switch {
		case q.State == api.ConfirmPending:
			if !seen {
				news = true
				v.latest = q.ID
				if !v.c.json {
					fmt.Fprintf(out, "? %s  %s\n  (yes/no until %s)\n", q.ID, render.Clean(q.Question), v.p.time(q.DeadlineUnixSeconds))
				}
			}
		case n.first || (seen && before == q.State):
		case q.State == api.ConfirmNotice:
			news = true
			if !v.c.json {
				fmt.Fprintf(out, "! %s  %s\n", q.ID, lines(q.Question))
			}
		default:
			news = true
			if !v.c.json {
				by := ""
				if q.DecidedBy != nil {
					by = " (" + render.Clean(*q.DecidedBy) + ")"
				}
				fmt.Fprintf(out, "= %s  %s%s\n", q.ID, render.Paint(string(q.State), v.p.color), by)
			}
		}
		if news && v.c.json {
			v.c.printJSON(q)
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
		fmt.Fprintln(v.c.stderr, "scv: answer with yes or no, or ID yes|no")
		return
	}
	if id == "" {
		fmt.Fprintln(v.c.stderr, "scv: no question to answer")
		return
	}
	st, err := v.c.do(api.CmdConfirmAnswer{ID: id, Answer: ans})
	if err != nil {
		fmt.Fprintf(v.c.stderr, "scv: %v\n", err)
		return
	}
	if !v.c.json {
		fmt.Fprintf(v.c.stdout, "answered %s %s\n", st.Confirm.ID, st.Confirm.State)
	}
}

// lines is a notice's text for the terminal: each of its lines made safe
// (render.Clean), the lines after the first indented, so that a digest of
// an email account (docs/mail.md) reads as it was written.
func lines(s string) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range parts {
		parts[i] = render.Clean(l)
	}
	return strings.Join(parts, "\n  ")
}
