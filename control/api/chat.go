package api

import (
	"cmp"
	"strings"
)

// MaxAccount is the longest channel or account name of a chat, in
// characters.
const MaxAccount = 64

// ParseChat splits a chat, `<channel>:<account>` such as local:owner,
// refusing (ErrInvalidArgument) one without a colon, one longer than two
// names and the colon, and a side CheckChatName refuses. Which channels
// exist is control/channels' to say.
func ParseChat(chat string) (channel, account string, err error) {
	if len(chat) > 2*MaxAccount+1 {
		return "", "", Errorf(ErrInvalidArgument, "chat is longer than %d characters: want <channel>:<account>", 2*MaxAccount+1)
	}
	channel, account, ok := strings.Cut(chat, ":")
	if !ok {
		return "", "", Errorf(ErrInvalidArgument, "chat %q: want <channel>:<account>, such as local:owner", chat)
	}
	if err := cmp.Or(CheckChatName("channel", channel), CheckChatName("account", account)); err != nil {
		return "", "", Errorf(ErrInvalidArgument, "chat %q: %v", chat, err)
	}
	return channel, account, nil
}

// CheckChatName checks a chat's channel or account name (field says
// which): 1 to MaxAccount characters of letters, digits, '_', '.' and
// '-'.
func CheckChatName(field, name string) error {
	switch {
	case name == "":
		return Errorf(ErrInvalidArgument, "%s is empty", field)
	case len(name) > MaxAccount:
		return Errorf(ErrInvalidArgument, "%s %q is longer than %d characters", field, name, MaxAccount)
	}
	for _, r := range name {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_' || r == '.' || r == '-') {
			return Errorf(ErrInvalidArgument, "%s %q: only letters, digits, '_', '.' and '-' are allowed", field, name)
		}
	}
	return nil
}
