package confirm

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"scv/control/api"
)

// TestTellMail: a digest for a mail chat is a notice of that chat in the
// question log, delivered once: told again under its ID (after a crash,
// by a manager loaded anew) it is neither recorded nor delivered again. A
// chat not connected records nothing; a delivery that fails is logged
// without the text.
func TestTellMail(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	var logged bytes.Buffer
	e.m.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	const text = "Mail for work: 1 to report\n1. Boss <boss@example.com>: Q3 numbers"

	told, err := e.m.TellMail(ctx, "local:mail", "mail-work-1", text)
	assert.ErrorContains(t, err, "local:mail is not connected")
	assert.False(t, told)
	assert.Empty(t, e.log(), "nothing recorded")
	assert.False(t, e.m.Told("mail-work-1"))

	e.chats.others = []string{"local:mail"}
	told, err = e.m.TellMail(ctx, "local:mail", "mail-work-1", text)
	require.NoError(t, err)
	assert.True(t, told)
	assert.True(t, e.m.Told("mail-work-1"))
	assert.Equal(t, []delivery{{"local:mail", "mail-work-1", text}}, e.chats.Delivered())
	chat := "local:mail"
	qs, err := e.m.List(ctx, api.CmdConfirmList{Chat: &chat})
	require.NoError(t, err)
	require.Len(t, qs, 1)
	assert.Equal(t, api.ConfirmNotice, qs[0].State)
	assert.Equal(t, text, qs[0].Question)
	assert.Equal(t, "local:mail", qs[0].Chat)

	told, err = e.m.TellMail(ctx, "local:mail", "mail-work-1", text+" and more")
	require.NoError(t, err)
	assert.False(t, told, "told already")
	again := e.manager()
	again.Logger = e.m.Logger
	told, err = again.TellMail(ctx, "local:mail", "mail-work-1", text)
	require.NoError(t, err)
	assert.False(t, told, "told already, before the restart")
	assert.Len(t, e.log(), 1, "one notice")
	assert.Len(t, e.chats.Delivered(), 1, "delivered once")

	e.chats.fail = errors.New("the platform said no")
	told, err = again.TellMail(ctx, "local:mail", "mail-work-2", "Mail for work: secret subject")
	require.NoError(t, err)
	assert.True(t, told, "recorded: the chat shows it")
	assert.Contains(t, logged.String(), "the platform said no")
	assert.NotContains(t, logged.String(), "secret subject")
	assert.NotContains(t, logged.String(), "Q3 numbers")
}
