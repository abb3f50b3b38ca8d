package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"scv/control/api"
	"scv/control/metrics"
	"scv/ledger"
	"scv/reducer"
)

// Ledger is what the UI reads of the ledger (*ledger.Ledger, with
// Projects listing the projects table's summary rows).
type Ledger interface {
	// Projects lists the projects' summary rows (all: the archived
	// ones too).
	Projects(ctx context.Context, all bool) ([]ledger.Summary, error)
	// Project is the committed state of a project, by ID or name.
	Project(ctx context.Context, ref string) (*reducer.Project, error)
	// EventsPage reads a project's live events after a sequence.
	EventsPage(ctx context.Context, projectID string, after uint64, limit int) (ledger.Page, error)
}

// Questions is the daemon's questions to the owner (*confirm.Manager).
type Questions interface {
	List(ctx context.Context, c api.CmdConfirmList) ([]api.Question, error)
	Answer(ctx context.Context, id string, yes bool, by string) (api.ConfirmInfo, error)
}

// AnsweredBy is who the UI's writes are recorded as made by: the answers
// to questions, and the commands it sends (api.WithCaller).
const AnsweredBy = "web UI"

// Files are where a daemon on socket keeps its UI's token and its
// address with the token, each 0600 and only while the UI runs: `scv ui`
// prints the second.
func Files(socket string) (token, url string) {
	return socket + ".http-token", socket + ".http-url"
}

// Server is the web UI and /metrics on one loopback listener: a daemon
// service (control/startstop). Set the fields, then Start; Stop ends it.
// Each Start makes a new token.
type Server struct {
	// Addr is the address to listen on: host:port with host 127.0.0.1,
	// ::1 or localhost (port 0: any free one). Anything else is refused
	// by Start (CheckAddr).
	Addr string
	// TokenFile and URLFile receive the token and the UI's address with
	// it, created 0600 at Start (replacing what was there) and removed at
	// Stop. Empty: not written.
	TokenFile, URLFile string

	Ledger Ledger
	// Questions: nil shows no questions.
	Questions Questions
	// Handler is the daemon's way in (control.Service), for the commands
	// the UI sends besides answers (a task's retry); nil offers none.
	Handler api.Handler
	// Agents: nil shows no live agents (no /agents page, no section on
	// a project's page).
	Agents Agents
	// Mail: nil shows no email accounts (no /mail page).
	Mail Mail
	// MCP serves the Model Context Protocol at /mcp (docs/mcp.md), behind
	// the same guard as the pages; nil: no /mcp.
	MCP http.Handler
	// Metrics is served at /metrics and counts the UI's requests; nil
	// serves 404 there.
	Metrics *metrics.Recorder
	// StaleAfter is the daemon's stale window: the timeline shows a
	// silence of over half of it as a gap.
	StaleAfter time.Duration
	// DB names the ledger database in the verify command shown.
	DB string
	// Version is the daemon's release.
	Version string
	// Clock is "now" for the drawings (nil: the system clock).
	Clock  func() time.Time
	Logger *slog.Logger
	// Open is the command that prints the address to open, token
	// included, which the log line at start names ("" is "scv ui"). The
	// token is never logged: it is kept only in TokenFile and URLFile
	// (SPEC section 7).
	Open string

	mu     sync.Mutex
	srv    *http.Server
	done   chan struct{}
	addr   string // host:port listened on
	token  string
	hosts  map[string]bool // Host headers accepted
	origin map[string]bool // Origins accepted for writes
	cookie string
	events *eventCache
	qseq   questionSeq
}

// CheckAddr refuses an address the UI must not listen on: anything but
// 127.0.0.1, ::1 or localhost, with a port.
func CheckAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--http %q: want HOST:PORT on loopback, such as 127.0.0.1:0: %v", addr, err)
	}
	switch host {
	case "127.0.0.1", "::1", "localhost":
	default:
		return fmt.Errorf("--http %s: the web UI listens on a loopback address only (127.0.0.1, ::1 or localhost), never %q", addr, host)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("--http %s: port %q is not a number from 0 to 65535", addr, port)
	}
	return nil
}

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (s *Server) now() time.Time {
	if s.Clock != nil {
		return s.Clock()
	}
	return time.Now()
}

// Start checks the address, listens, makes the token, writes the token
// and URL files and serves until Stop.
func (s *Server) Start(ctx context.Context) error {
	if err := CheckAddr(s.Addr); err != nil {
		return err
	}
	if s.Ledger == nil {
		return errors.New("web UI: no ledger")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return nil
	}
	host, port, _ := net.SplitHostPort(s.Addr)
	if host == "localhost" {
		host = "127.0.0.1" // loopback whatever the resolver says
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort(host, port))
	if err != nil {
		return fmt.Errorf("web UI: %w", err)
	}
	tok := make([]byte, 32)
	if _, err := rand.Read(tok); err != nil {
		ln.Close()
		return fmt.Errorf("web UI token: %w", err)
	}
	s.token = hex.EncodeToString(tok)
	s.addr = ln.Addr().String()
	_, p, _ := net.SplitHostPort(s.addr)
	s.hosts = map[string]bool{s.addr: true, "localhost:" + p: true}
	s.origin = map[string]bool{"http://" + s.addr: true, "http://localhost:" + p: true}
	s.cookie = "scv_ui_" + p
	if s.events == nil {
		s.events = newEventCache()
	}
	if err := s.writeFiles(); err != nil {
		ln.Close()
		return err
	}
	s.srv = &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.logger().Handler(), slog.LevelDebug),
	}
	s.done = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger().Error("web UI", "err", err)
		}
	}(s.srv, s.done)
	open := s.Open
	if open == "" {
		open = "scv ui"
	}
	s.logger().Info("web UI listening; scv ui prints the address to open, with its token", "url", s.url(), "open", open)
	return nil
}

// Stop ends the UI: it stops taking connections, lets the requests being
// answered finish (for up to 5 seconds), and removes the token and URL
// files.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.srv.Close()
	}
	<-s.done
	s.removeFiles()
	s.srv, s.done, s.token = nil, nil, ""
}

// URL is the UI's address without the token ("" unless started).
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url()
}

func (s *Server) url() string {
	if s.srv == nil {
		return ""
	}
	return s.base()
}

// base is the URL of the address listened on.
func (s *Server) base() string { return "http://" + s.addr + "/" }

// TokenURL is the address to open once: with the token, which the UI
// trades for a cookie ("" unless started).
func (s *Server) TokenURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return ""
	}
	return s.url() + "?token=" + s.token
}

// writeFiles writes the token and URL files, each 0600, each by a rename
// so that a reader never sees half of one. s.mu is held.
func (s *Server) writeFiles() error {
	for _, f := range []struct{ path, text string }{{s.TokenFile, s.token}, {s.URLFile, s.base() + "?token=" + s.token}} {
		if f.path == "" {
			continue
		}
		if err := writePrivate(f.path, f.text+"\n"); err != nil {
			s.removeFiles()
			return fmt.Errorf("web UI: write %s: %w", f.path, err)
		}
	}
	return nil
}

// removeFiles removes the token and URL files if they still hold this
// start's token (a daemon that took over may have written its own).
func (s *Server) removeFiles() {
	for _, p := range []string{s.TokenFile, s.URLFile} {
		if p == "" {
			continue
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), s.token) {
			os.Remove(p)
		}
	}
}

// writePrivate replaces path with text, mode 0600.
func writePrivate(path, text string) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the rename, nothing there
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
