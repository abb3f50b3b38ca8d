package follow

import (
	"context"
	"errors"
	"time"

	"scv/control/api"
)

// AnswerPoll is how often Answer asks where a question stands.
const AnswerPoll = time.Second

// ErrNoQuestion is a reply about a question that carries none.
var ErrNoQuestion = errors.New("the daemon's reply carries no question")

// Question sends cmd, a question's ask (confirm_ask) or status
// (confirm_status), and returns where the question stands.
func Question(ctx context.Context, h api.Handler, cmd api.Command) (*api.ConfirmInfo, error) {
	st, err := h.Handle(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if st.Confirm == nil {
		return nil, ErrNoQuestion
	}
	return st.Confirm, nil
}

// Answer waits for the owner's answer to question q: it asks where q
// stands every AnswerPoll (asking keeps a pending question alive: one
// nobody asks about for a minute is withdrawn) while it is pending, until
// deadline (zero: until it is decided) or ctx's end, and returns where it
// stands last. `scv confirm ask --wait` and MCP's owner_ask wait so.
func Answer(ctx context.Context, h api.Handler, q *api.ConfirmInfo, deadline time.Time) (*api.ConfirmInfo, error) {
	for q.State == api.ConfirmPending && (deadline.IsZero() || time.Now().Before(deadline)) {
		wait := AnswerPoll
		if !deadline.IsZero() {
			wait = min(wait, time.Until(deadline))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		var err error
		if q, err = Question(ctx, h, api.CmdConfirmStatus{ID: q.ID}); err != nil {
			return nil, err
		}
	}
	return q, nil
}
