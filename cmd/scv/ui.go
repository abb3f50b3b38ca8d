package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"scv/control/api"
	"scv/control/web"
)

// UIOptions is `scv ui`.
type UIOptions struct {
	c *client
}

func newUICmd(c *client) *cobra.Command {
	o := &UIOptions{c: c}
	return &cobra.Command{
		Use:   "ui",
		Short: "Print the address of the daemon's web UI, with its token",
		Long: `Print the address of the web UI of the daemon on --socket, with the token
that opens it: open it once in a browser on this machine, which trades the
token for a cookie. The daemon serves the UI only when started with
--http ADDR (a loopback address; port 0 picks a free one), and makes a new
token at each start. The address is read from the file beside the socket
(SOCKET.http-url, mode 0600) that the daemon writes while the UI runs.

Exit 0 with the address; 1 when the daemon runs without --http; 3 when
no daemon answers on the socket. Under --json it prints {"url","file"}.`,
		Example: `  scv daemon --http 127.0.0.1:0     # in one terminal
  scv ui                             # in another
  xdg-open "$(scv ui)"`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run() },
	}
}

// uiJSON is `scv ui --json`.
type uiJSON struct {
	URL  string `json:"url"`
	File string `json:"file"`
}

func (o *UIOptions) run() error {
	// The file outlives a daemon that was killed: ask the daemon first.
	if _, err := o.c.do(api.CmdStatus{}); err != nil {
		return err
	}
	_, file := web.Files(o.c.socket)
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the daemon at %s runs without a web UI: start it with `scv daemon --http 127.0.0.1:0` (any loopback address; port 0 picks a free one)", o.c.socket)
	}
	if err != nil {
		return fmt.Errorf("the web UI's address: %w", err)
	}
	url := strings.TrimSpace(string(b))
	if url == "" {
		return fmt.Errorf("the web UI's address: %s is empty", file)
	}
	if o.c.json {
		return o.c.printJSON(uiJSON{URL: url, File: file})
	}
	_, err = fmt.Fprintln(o.c.stdout, url)
	return err
}
