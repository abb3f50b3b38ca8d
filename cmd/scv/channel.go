package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/control/render"
)

// newChannelsCmd is `scv channels`.
func newChannelsCmd(c *client) *cobra.Command {
	return &cobra.Command{
		Use:     "channels",
		Short:   "List the channel accounts and their health",
		Example: `  scv channels`,
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := c.call(api.CmdStatus{}, printComponentsReply)
			return err
		},
	}
}

// newChannelCmd is `scv channel`.
func newChannelCmd(c *client) *cobra.Command {
	return withExample(`  scv channel set local:owner --enable
  scv channel logout wechat:main`, group("channel", "Create, change or remove a channel account",
		newChannelSetCmd(c), newChannelLogoutCmd(c)))
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
// account's health.
func printComponentsReply(p *printer, st *api.DaemonStatus) error {
	if len(st.Components) == 0 {
		_, err := fmt.Fprintln(p.w, "no channel accounts")
		return err
	}
	t := render.NewTable("ACCOUNT", "ENABLED", "!STATE", "TOOLS", "SENDERS", "RESTARTS", "LAST SUCCESS", "~ERROR")
	for _, c := range st.Components {
		senders := "-"
		if c.Senders != nil {
			senders = string(*c.Senders)
		}
		t.Add(c.ID, fmt.Sprint(c.Enabled), string(c.State), string(c.RemoteTools), senders,
			fmt.Sprint(c.Restarts), p.agoPtr(c.LastSuccessUnixSeconds), orDash(c.Error))
	}
	return p.table(t)
}
