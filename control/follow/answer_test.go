package follow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
	"scv/control/follow"
	"scv/control/rpc"
)

// TestAnswer: Answer waits for the owner's answer to a question, asking
// where it stands as it goes (which keeps it alive past the minute a
// question nobody asks about is withdrawn in), and returns it once
// decided; with a deadline it returns the question still pending; its
// context ends it; a reply with no question is ErrNoQuestion.
func TestAnswer(t *testing.T) {
	td := newDaemon(t)
	td.start()
	td.must(api.CmdChannelSet{Channel: "local", Account: "owner", Enabled: true})
	h := &rpc.Remote{Socket: td.sock}
	ctx := context.Background()
	ask := func(text string) *api.ConfirmInfo {
		t.Helper()
		var q *api.ConfirmInfo
		require.Eventually(t, func() bool { // the local chat connects
			var err error
			q, err = follow.Question(ctx, h, api.CmdConfirmAsk{Question: text})
			return err == nil && q.State == api.ConfirmPending
		}, guard, 20*time.Millisecond)
		return q
	}

	q := ask("ship it?")
	began := time.Now()
	pending, err := follow.Answer(ctx, h, q, time.Now().Add(1500*time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, api.ConfirmPending, pending.State, "the deadline came first")
	assert.GreaterOrEqual(t, time.Since(began), 1500*time.Millisecond)

	answered := make(chan struct{})
	go func() {
		time.Sleep(2 * follow.AnswerPoll)
		td.must(api.CmdConfirmAnswer{ID: q.ID, Answer: "yes"})
		close(answered)
	}()
	got, err := follow.Answer(ctx, h, q, time.Time{})
	require.NoError(t, err)
	assert.Equal(t, api.ConfirmYes, got.State)
	<-answered

	q = ask("and this?")
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(follow.AnswerPoll/2, cancel)
	_, err = follow.Answer(cctx, h, q, time.Time{})
	assert.ErrorIs(t, err, context.Canceled)

	noQuestion := api.HandlerFunc(func(context.Context, api.Command) (*api.DaemonStatus, error) { return &api.DaemonStatus{}, nil })
	_, err = follow.Question(ctx, noQuestion, api.CmdConfirmStatus{ID: q.ID})
	assert.True(t, errors.Is(err, follow.ErrNoQuestion))
}
