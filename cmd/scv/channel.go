package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"scv/control/api"
	"scv/control/channels"
	"scv/control/render"
)

// newChannelsCmd is `scv channels`, the same as `scv channel list`.
func newChannelsCmd(c *client) *cobra.Command {
	cmd := newChannelListCmd(c)
	cmd.Use, cmd.Example = "channels", `  scv channels`
	return cmd
}

// newChannelListCmd is `scv channel list`.
func newChannelListCmd(c *client) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the channel accounts and their health",
		Long: `List every channel account with its health, and, for each email account, its
IMAP URL, user and mail chat (never its password).`,
		Example: `  scv channel list`,
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := c.call(api.CmdStatus{}, printComponentsReply)
			return err
		},
	}
}

// newChannelCmd is `scv channel`.
func newChannelCmd(c *client) *cobra.Command {
	return withExample(`  scv channel list
  scv channel set local:owner --enable
  scv channel login email:work --imap imaps://mail.example.com --user me@example.com --password-file ~/.config/scv/work.pass
  scv channel logout wechat:main`, group("channel", "List, create, change or remove channel accounts",
		newChannelListCmd(c), newChannelSetCmd(c), newChannelLoginCmd(c), newChannelLogoutCmd(c)))
}

// ChannelSetOptions is `scv channel set`.
type ChannelSetOptions struct {
	c                                        *client
	Channel, Account                         string
	Enable, Disable                          bool
	Workspace, RemoteTools, Senders, Purpose string
	set                                      func(string) bool
}

func newChannelSetCmd(c *client) *cobra.Command {
	o := &ChannelSetOptions{c: c}
	cmd := &cobra.Command{
		Use:   "set CHANNEL:ACCOUNT --enable|--disable",
		Short: "Create or change a channel account",
		Long: `Create or change the account CHANNEL:ACCOUNT (local:owner is the owner's chat
on this machine). Flags left out keep the saved value; a new account gets
--remote-tools none, --senders owner, --purpose chat.`,
		Example: `  scv channel set local:owner --enable
  scv channel set wechat:main --enable --senders anyone`,
		Args:              exactArgs("CHANNEL:ACCOUNT"),
		ValidArgsFunction: c.completeChats,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.Channel, o.Account, err = api.ParseChat(args[0]); err != nil {
				return usageError{err.Error()}
			}
			if o.Enable == o.Disable {
				return usagef("give one of --enable and --disable")
			}
			o.set = cmd.Flags().Changed
			return o.run()
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.Enable, "enable", false, "run the account")
	f.BoolVar(&o.Disable, "disable", false, "stop the account, keeping its settings")
	f.StringVar(&o.Workspace, "workspace", "", "the account's workspace `DIR` (default: keep the saved one)")
	f.StringVar(&o.RemoteTools, "remote-tools", "", "who may use tools remotely: `none|owner` (default: keep)")
	f.StringVar(&o.Senders, "senders", "", "whose messages it answers: `owner|anyone` (default: keep)")
	f.StringVar(&o.Purpose, "purpose", "", "what it carries: `chat|mail` (default: keep)")
	cmd.RegisterFlagCompletionFunc("remote-tools", words("none", "owner"))
	cmd.RegisterFlagCompletionFunc("senders", words("owner", "anyone"))
	cmd.RegisterFlagCompletionFunc("purpose", words("chat", "mail"))
	return cmd
}

func (o *ChannelSetOptions) run() error {
	c := api.CmdChannelSet{Channel: o.Channel, Account: o.Account, Enabled: o.Enable}
	if o.set("workspace") {
		c.Workspace = &o.Workspace
	}
	if o.set("remote-tools") {
		var v api.RemoteTools
		if err := v.UnmarshalText([]byte(o.RemoteTools)); err != nil {
			return usagef("--remote-tools: %v", err)
		}
		c.RemoteTools = &v
	}
	if o.set("senders") {
		var v api.Senders
		if err := v.UnmarshalText([]byte(o.Senders)); err != nil {
			return usagef("--senders: %v", err)
		}
		c.Senders = &v
	}
	if o.set("purpose") {
		var v api.Purpose
		if err := v.UnmarshalText([]byte(o.Purpose)); err != nil {
			return usagef("--purpose: %v", err)
		}
		c.Purpose = &v
	}
	_, err := o.c.call(c, printComponentsReply)
	return err
}

// ChannelLoginOptions is `scv channel login`.
type ChannelLoginOptions struct {
	c                                  *client
	Channel, Account                   string
	IMAP, User, PasswordFile, MailChat string
	set                                func(string) bool
}

func newChannelLoginCmd(c *client) *cobra.Command {
	o := &ChannelLoginOptions{c: c}
	cmd := &cobra.Command{
		Use:   "login email:NAME --imap URL --user U --password-file F",
		Short: "Set an email account's IMAP server, user and password",
		Long: `Set the IMAP URL, user and password of the email account email:NAME, and its
mail chat with --mail-chat (a new account needs one: a chat account of
purpose mail, such as local:mail), creating the account if need be; it is
enabled, and its other settings are kept. The URL is imaps://host[:port]
(TLS) or imap://host[:port] (STARTTLS; plain text only to a loopback
address).

The password is read from the file F (its content, one trailing newline
trimmed), or with F - from standard input (on a terminal, without echo);
never from an argument. The daemon keeps it in the account's stored
credentials, shows it nowhere, and removes it at scv channel logout.`,
		Example: `  scv channel set local:mail --enable --purpose mail
  scv channel login email:work --imap imaps://mail.example.com --user me@example.com \
      --password-file ~/.config/scv/work.pass --mail-chat local:mail
  pass show mail/work | scv channel login email:work --imap imaps://mail.example.com --user me --password-file -`,
		Args:              exactArgs("email:NAME"),
		ValidArgsFunction: c.completeChats,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.Channel, o.Account, err = api.ParseChat(args[0]); err != nil {
				return usageError{err.Error()}
			}
			if o.IMAP == "" || o.User == "" || o.PasswordFile == "" {
				return usagef("give --imap URL, --user U and --password-file F (- for standard input)")
			}
			o.set = cmd.Flags().Changed
			return o.run()
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.IMAP, "imap", "", "the IMAP server, `URL` imaps://host[:port] or imap://host[:port]")
	f.StringVar(&o.User, "user", "", "the IMAP user `U`")
	f.StringVar(&o.PasswordFile, "password-file", "", "the `FILE` holding the password, - for standard input")
	f.StringVar(&o.MailChat, "mail-chat", "", "the chat `C` of purpose mail that gets the digests (default: keep)")
	return cmd
}

func (o *ChannelLoginOptions) run() error {
	password, err := o.password()
	if err != nil {
		return err
	}
	c := api.CmdChannelLogin{Channel: o.Channel, Account: o.Account, IMAP: o.IMAP, User: o.User, Password: string(password)}
	if o.set("mail-chat") {
		c.MailChat = &o.MailChat
	}
	_, err = o.c.call(c, printComponentsReply)
	return err
}

// password reads the password: from --password-file, or standard input
// for -, without echo on a terminal.
func (o *ChannelLoginOptions) password() (channels.Secret, error) {
	if o.PasswordFile != "-" {
		return channels.ReadPasswordFile("--password-file", o.PasswordFile)
	}
	if f, ok := o.c.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(o.c.stderr, "password for %s: ", channels.ID(channels.Kind(o.Channel), o.Account))
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(o.c.stderr)
		if err != nil {
			return "", fmt.Errorf("read the password: %w", err)
		}
		return channels.Password(b)
	}
	r, err := o.c.openInput("-", "the password")
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, channels.MaxPasswordLen+3))
	if err != nil {
		return "", fmt.Errorf("read the password: %w", err)
	}
	p, err := channels.Password(b)
	if err != nil {
		return "", api.Errorf(api.ErrInvalidArgument, "standard input: %v", err)
	}
	return p, nil
}

func newChannelLogoutCmd(c *client) *cobra.Command {
	return &cobra.Command{
		Use:               "logout CHANNEL:ACCOUNT",
		Short:             "Stop an account and remove its settings, credentials and state",
		Example:           `  scv channel logout wechat:main`,
		Args:              exactArgs("CHANNEL:ACCOUNT"),
		ValidArgsFunction: c.completeChats,
		RunE: func(cmd *cobra.Command, args []string) error {
			channel, account, err := api.ParseChat(args[0])
			if err != nil {
				return usageError{err.Error()}
			}
			_, err = c.call(api.CmdChannelLogout{Channel: channel, Account: account}, printComponentsReply)
			return err
		},
	}
}

// newReloadCmd is `scv reload`.
func newReloadCmd(c *client) *cobra.Command {
	return &cobra.Command{
		Use:   "reload",
		Short: "Reread the channel settings file",
		Long: `Ask the daemon to reread its channel settings file (scv daemon --config) and
reconcile the accounts with it; an invalid file changes nothing.`,
		Example: `  scv reload`,
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := c.call(api.CmdReload{}, printComponentsReply)
			return err
		},
	}
}

// printComponentsReply is the reply to the channel commands: every
// account's health, then the email accounts' settings.
func printComponentsReply(p *printer, st *api.DaemonStatus) error {
	if len(st.Components) == 0 {
		_, err := fmt.Fprintln(p.w, "no channel accounts")
		return err
	}
	t := render.NewTable("ACCOUNT", "ENABLED", "!STATE", "TOOLS", "SENDERS", "RESTARTS", "LAST SUCCESS", "~ERROR")
	email, emails := render.NewTable("EMAIL", "~IMAP", "USER", "MAIL CHAT"), 0
	for _, c := range st.Components {
		senders := "-"
		if c.Senders != nil {
			senders = string(*c.Senders)
		}
		t.Add(c.ID, fmt.Sprint(c.Enabled), string(c.State), string(c.RemoteTools), senders,
			fmt.Sprint(c.Restarts), p.agoPtr(c.LastSuccessUnixSeconds), orDash(c.Error))
		if e := c.Email; e != nil {
			email.Add(c.ID, e.IMAP, e.User, e.MailChat)
			emails++
		}
	}
	if err := p.table(t); err != nil {
		return err
	}
	if m := mailTable(p, st.Components); m != nil {
		if _, err := fmt.Fprintln(p.w); err != nil {
			return err
		}
		if err := p.table(m); err != nil {
			return err
		}
	}
	if emails == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(p.w); err != nil {
		return err
	}
	return p.table(email)
}
