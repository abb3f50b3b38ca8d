package control_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control"
	"scv/control/api"
	"scv/control/confirm"
	"scv/control/rpc"
	"scv/ledger"
	"scv/ledger/sqlite"
)

// questionsStart is the clock of questionsEnv.
var questionsStart = time.Date(2025, 3, 1, 12, 0, 0, 123_000_000, time.UTC)

// connectedChats is a confirm.Chats with the given chats connected, which
// takes every question it is handed.
type connectedChats []string

func (c connectedChats) Connected(chat string) bool                            { return slices.Contains(c, chat) }
func (c connectedChats) ConnectedChats() []string                              { return c }
func (c connectedChats) Deliver(context.Context, string, string, string) error { return nil }

// questionsEnv is a ledger on a new file and a loaded confirm.Manager over
// it, whose clock stands at questionsStart, with chats connected.
func questionsEnv(t *testing.T, chats ...string) (*ledger.Ledger, *confirm.Manager) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), sqlite.Options{})
	require.NoError(t, err)
	l, err := ledger.Open(ctx, db, ledger.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	m := &confirm.Manager{Log: db, Clock: func() time.Time { return questionsStart }, Chats: connectedChats(chats)}
	require.NoError(t, m.Load(ctx))
	return l, m
}

// TestQuestionsThroughService: the control.Service answers the question actions
// with the Manager, in the wire's shapes.
func TestQuestionsThroughService(t *testing.T) {
	ctx := context.Background()
	l, m := questionsEnv(t, "local:owner")
	s := &control.Service{Ledger: l, Questions: m}
	st, err := s.Handle(ctx, api.CmdConfirmAsk{Question: "Via the service?"})
	require.NoError(t, err)
	require.NotNil(t, st.Confirm)
	id := st.Confirm.ID
	assert.Equal(t, api.ConfirmPending, st.Confirm.State)

	st, err = s.Handle(ctx, api.CmdConfirmAnswer{ID: id, Answer: "yes"})
	require.NoError(t, err)
	assert.Equal(t, api.ConfirmYes, st.Confirm.State)
	st, err = s.Handle(ctx, api.CmdConfirmStatus{ID: id})
	require.NoError(t, err)
	assert.Equal(t, api.ConfirmYes, st.Confirm.State)
	st, err = s.Handle(ctx, api.CmdConfirmList{})
	require.NoError(t, err)
	require.Len(t, st.Questions, 1)
	assert.Equal(t, "unknown peer", *st.Questions[0].DecidedBy, "no connection in this test")

	_, err = s.Handle(ctx, api.CmdConfirmAnswer{ID: id, Answer: "no"})
	e := api.ErrorOf(err)
	require.NotNil(t, e)
	assert.Equal(t, api.CodeConflict, e.Code)
	assert.Equal(t, api.ReasonConflict, e.Data.Reason)
}

// TestQuestionsOverSocket: the question actions on a real daemon socket, as `scv`
// sends them; the answer's decided_by is the peer of the connection it
// came on. Set SCV_PRINT_WIRE=1 to print the lines (docs/questions.md).
func TestQuestionsOverSocket(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, m := questionsEnv(t, "telegram:main")
	sock := filepath.Join(t.TempDir(), "run", "d.sock") // t.TempDir is 0755: Listen makes run 0700
	ln, err := control.Listen(sock)
	require.NoError(t, err)
	srv := &control.Server{Service: &control.Service{Ledger: l, Version: "1.0.0", PID: 4242, Questions: m}}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Shutdown(context.Background()))
		<-served
	})
	c, err := rpc.Dial(ctx, sock)
	require.NoError(t, err)
	defer c.Close()

	send := func(n int, params string) map[string]any {
		line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"daemon.control","params":%s}`, n, params)
		reply, err := c.Send(ctx, []byte(line+"\n"))
		require.NoError(t, err)
		if os.Getenv("SCV_PRINT_WIRE") != "" {
			fmt.Println(line)
			fmt.Println(string(reply))
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(reply, &m))
		return m
	}
	r := send(1, `{"action":"confirm_ask","question":"Deploy release 2.0 to production?","parent":"01JAAAA,01JBBBB","timeout_seconds":600}`)
	conf := r["result"].(map[string]any)["confirm"].(map[string]any)
	id := conf["id"].(string)
	assert.Equal(t, map[string]any{"id": id, "state": "pending", "chat": "telegram:main",
		"deadline_unix_seconds": float64(questionsStart.Add(10 * time.Minute).Unix())}, conf)
	r = send(2, fmt.Sprintf(`{"action":"confirm_status","id":%q}`, id))
	assert.Equal(t, "pending", r["result"].(map[string]any)["confirm"].(map[string]any)["state"])
	r = send(3, fmt.Sprintf(`{"action":"confirm_answer","id":%q,"answer":"yes"}`, id))
	assert.Equal(t, "yes", r["result"].(map[string]any)["confirm"].(map[string]any)["state"])
	r = send(4, fmt.Sprintf(`{"action":"confirm_answer","id":%q,"answer":"no"}`, id))
	assert.Equal(t, map[string]any{"reason": "conflict"}, r["error"].(map[string]any)["data"])
	assert.Equal(t, float64(api.CodeConflict), r["error"].(map[string]any)["code"])
	r = send(5, `{"action":"confirm_list","chat":"telegram:main","after":0,"wait_seconds":5}`)
	qs := r["result"].(map[string]any)["questions"].([]any)
	require.Len(t, qs, 1)
	by := qs[0].(map[string]any)["decided_by"].(string)
	assert.Equal(t, fmt.Sprintf("uid %d pid %d", os.Getuid(), os.Getpid()), by)
	r = send(6, `{"action":"confirm_ask","question":"Empty timeout?","timeout_seconds":0}`)
	assert.Equal(t, map[string]any{"reason": "invalid_argument"}, r["error"].(map[string]any)["data"])
	r = send(7, `{"action":"confirm_status","id":"01JNOSUCHQUESTION000000000"}`)
	assert.Equal(t, map[string]any{"reason": "not_found"}, r["error"].(map[string]any)["data"])
}
