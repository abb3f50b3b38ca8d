package api_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"scv/control/api"
)

// TestParseChat: a chat is `<channel>:<account>`, each side 1 to
// MaxAccount characters of letters, digits, '_', '.' and '-'; anything
// else is refused invalid_argument, saying what is wrong.
func TestParseChat(t *testing.T) {
	channel, account, err := api.ParseChat("local:owner")
	assert.NoError(t, err)
	assert.Equal(t, "local", channel)
	assert.Equal(t, "owner", account)
	long := strings.Repeat("a", api.MaxAccount)
	_, account, err = api.ParseChat("wechat:" + long)
	assert.NoError(t, err, "an account at the limit")
	assert.Equal(t, long, account)

	for _, tc := range []struct{ chat, want string }{
		{"owner", `chat "owner": want <channel>:<account>, such as local:owner`},
		{":owner", `chat ":owner": channel is empty`},
		{"local:", `chat "local:": account is empty`},
		{"local:own er", `chat "local:own er": account "own er": only letters, digits, '_', '.' and '-' are allowed`},
		{"local:a:b", `chat "local:a:b": account "a:b": only letters, digits, '_', '.' and '-' are allowed`},
		{"lo\x00cal:owner", `chat "lo\x00cal:owner": channel "lo\x00cal": only letters, digits, '_', '.' and '-' are allowed`},
		{"local:" + long + "a", `chat "local:` + long + `a": account "` + long + `a" is longer than 64 characters`},
		{strings.Repeat("x", 5000) + ":owner", "chat is longer than 129 characters: want <channel>:<account>"},
	} {
		_, _, err := api.ParseChat(tc.chat)
		e := api.ErrorOf(err)
		if assert.NotNil(t, e, tc.chat) {
			assert.Equal(t, api.ReasonInvalidArgument, e.Data.Reason, tc.chat)
			assert.Equal(t, tc.want, e.Message, tc.chat)
		}
	}
}
