package web

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"scv/control/api"
	"scv/control/render"
	"scv/control/view"
	"scv/ledger"
	"scv/reducer"
)

// EventsPerPage is how many events the project page lists at a time.
const EventsPerPage = 50

// PollEvery is how often the pages ask whether what they show changed:
// a new event shows within it plus the time of one page.
const PollEvery = 500 * time.Millisecond

//go:embed templates/*.tmpl
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// pages are the page templates, each with the layout.
var pages = func() map[string]*template.Template {
	funcs := template.FuncMap{
		"unix":  func(s uint64) time.Time { return time.Unix(int64(s), 0) },
		"deref": deref,
		"derefu": func(p *uint64) uint64 {
			if p == nil {
				return 0
			}
			return *p
		},
		// qctx is a question with the page its answer goes back to.
		"qctx": func(q api.Question, back string) questionItem { return questionItem{Q: q, Back: back} },
		"ms": func(ms int64) time.Time {
			if ms == 0 {
				return time.Time{}
			}
			return time.UnixMilli(ms)
		},
	}
	for k, v := range view.Funcs {
		funcs[k] = v
	}
	out := map[string]*template.Template{}
	for _, name := range []string{"projects", "project", "questions", "agents", "mail", "error"} {
		t := template.Must(template.New("layout.tmpl").Funcs(funcs).ParseFS(templateFS, "templates/layout.tmpl", "templates/questions_part.tmpl", "templates/"+name+".tmpl"))
		out[name] = template.Must(t.Parse(view.TaskTemplate))
	}
	return out
}()

// staticFiles are the UI's script and style sheet: the style it shares
// with the HTML report, then its own, then the drawings'.
var staticFiles = func() map[string][]byte {
	out := map[string][]byte{}
	for _, name := range []string{"app.js", "app.css"} {
		b, err := fs.ReadFile(staticFS, "static/"+name)
		if err != nil {
			panic(err)
		}
		out[name] = b
	}
	out["app.css"] = slices.Concat([]byte(view.StyleSheet()), out["app.css"], []byte(render.StyleSheet()))
	return out
}()

// layout is what every page gives the layout.
type layout struct {
	Title string
	// Poll is the version URL the page's script polls; Version what it
	// answered when the page was made.
	Poll, Version string
	PollMs        int64
	Pending       int  // questions waiting for an answer
	HasQuestions  bool // the daemon asks questions
	HasAgents     bool // the daemon runs live agents
	HasMail       bool // the daemon has email accounts
	Body          any
}

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.projectsPage)
	mux.HandleFunc("GET /p/{ref}", s.projectPage)
	mux.HandleFunc("GET /p/{ref}/report.html", s.reportFile)
	mux.HandleFunc("POST /p/{ref}/tasks/{task}/retry", s.retry)
	mux.HandleFunc("GET /questions", s.questionsPage)
	mux.HandleFunc("POST /questions/{id}/answer", s.answer)
	mux.HandleFunc("GET /agents", s.agentsPage)
	mux.HandleFunc("GET /mail", s.mailPage)
	mux.HandleFunc("GET /api/version", s.version)
	mux.HandleFunc("GET /static/{file}", s.static)
	mux.Handle("GET /metrics", s.Metrics.Handler())
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	if s.MCP != nil {
		mux.Handle("/mcp", s.MCP)
	}
	return s.guard(mux)
}

// show renders page name with its layout, in one Write.
func (s *Server) show(w http.ResponseWriter, r *http.Request, code int, name string, l layout) {
	l.PollMs = PollEvery.Milliseconds()
	l.HasAgents = s.Agents != nil
	l.HasMail = s.Mail != nil
	if s.Questions != nil {
		l.HasQuestions = true
		if l.Pending == 0 {
			pending, _ := s.pending(r.Context())
			l.Pending = len(pending)
		}
	}
	var b bytes.Buffer
	if err := pages[name].Execute(&b, l); err != nil {
		s.logger().Error("web UI page", "page", name, "err", err)
		http.Error(w, "500 internal error: the page could not be made", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(b.Bytes())
}

// fail shows an error page, with the status the error's reason word
// calls for (api.ErrorOf): 404 for what is not there, 409 for a
// conflict (a question answered already), 400 for a refusal of the
// input, 503 while the ledger is unavailable, else 500.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusInternalServerError
	switch api.ErrorOf(err).Data.Reason {
	case api.ReasonNotFound:
		code = http.StatusNotFound
	case api.ReasonConflict, api.ReasonInvalidTransition, api.ReasonRunNotRunning:
		code = http.StatusConflict
	case api.ReasonInvalidArgument:
		code = http.StatusBadRequest
	case api.ReasonUnavailable:
		code = http.StatusServiceUnavailable
	default:
		s.logger().Error("web UI", "path", r.URL.Path, "err", err)
	}
	s.show(w, r, code, "error", layout{Title: http.StatusText(code), Body: errorPage{Code: code, Status: http.StatusText(code), Message: err.Error()}})
}

type errorPage struct {
	Code            int
	Status, Message string
}

// The projects list.

type projectsPage struct {
	Rows []ledger.Summary
}

func (s *Server) projectsPage(w http.ResponseWriter, r *http.Request) {
	rows, ver, err := s.projectsVersion(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	slices.SortStableFunc(rows, func(a, b ledger.Summary) int { return cmp.Compare(b.UpdatedMs, a.UpdatedMs) })
	s.show(w, r, http.StatusOK, "projects", layout{Title: "Projects", Poll: "/api/version?page=projects", Version: ver,
		Body: projectsPage{Rows: rows}})
}

func (s *Server) projectsVersion(ctx context.Context) ([]ledger.Summary, string, error) {
	rows, err := s.Ledger.Projects(ctx, true)
	if err != nil {
		return nil, "", err
	}
	var head uint64
	for _, p := range rows {
		head = max(head, p.Head)
	}
	q, err := s.questionsVersion(ctx)
	return rows, fmt.Sprintf("%d.%d.%s", len(rows), head, q), err
}

// The project page.

type projectPage struct {
	P *view.Project
	// Graph and Timeline are the drawings without their inline style
	// (the page links it): control/render escaped their ledger text.
	Graph, Timeline template.HTML
	Events          []eventRow
	// Older and Newer are the before= cursors of the next pages of
	// events ("": none).
	Older, Newer    string
	First           bool // the newest page of events
	CompactedBefore uint64
	Cut             bool // older events are not kept in memory
	CanRetry        bool
	Pending         []api.Question
	Verify          string
	// Agents are the live agents whose turns are runs of the project's
	// tasks.
	Agents []agentRow
	// Work is the project's work (scv project work), nil without one.
	Work *workView
}

type eventRow struct {
	Sequence uint64
	At       time.Time
	Kind     string
	Data     string
}

func (s *Server) projectPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, err := s.Ledger.Project(ctx, r.PathValue("ref"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rows, compacted, cut, err := s.events.get(ctx, s.Ledger, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.nowFor(p)
	v, err := view.Build(p, rows, view.Options{Now: now, StaleAfter: s.StaleAfter})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page := projectPage{
		P: v, CompactedBefore: compacted, Cut: cut, CanRetry: s.Handler != nil,
		Graph:    template.HTML(render.StripStyle(v.Graph)),    //nolint:gosec // escaped by control/render
		Timeline: template.HTML(render.StripStyle(v.Timeline)), //nolint:gosec // escaped by control/render
		Verify:   verifyCommand(s.DB, v),
	}
	page.Events, page.Older, page.Newer, page.First = eventsPage(rows, r.URL.Query().Get("before"), now.Location())
	agents := s.listAgents()
	page.Agents = projectAgents(agents, p)
	if s.Questions != nil {
		if page.Pending, err = s.pending(ctx); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	work, wv, err := s.projectWork(ctx, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page.Work = work
	q, err := s.questionsVersion(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.show(w, r, http.StatusOK, "project", layout{
		Title: p.Name, Poll: "/api/version?page=project&id=" + url.QueryEscape(p.ID),
		Version: fmt.Sprintf("%d.%s%s%s", p.LastSequence, q, s.projectAgentsVersion(agents, p.ID), wv), Pending: len(page.Pending), Body: page,
	})
}

// nowFor is the drawings' now for p: never before its last event.
func (s *Server) nowFor(p *reducer.Project) time.Time {
	now := s.now()
	if last := time.UnixMilli(p.Updated); last.After(now) {
		return last.In(now.Location())
	}
	return now
}

// eventsPage is the page of rows (in sequence order) before sequence
// before ("": the newest), newest first, with the cursors of the pages
// around it.
func eventsPage(rows []ledger.Row, before string, loc *time.Location) (page []eventRow, older, newer string, first bool) {
	end := len(rows)
	if b, err := strconv.ParseUint(before, 10, 64); err == nil && before != "" {
		end, _ = slices.BinarySearchFunc(rows, b, func(r ledger.Row, seq uint64) int { return cmp.Compare(r.Sequence, seq) })
	}
	start := max(end-EventsPerPage, 0)
	for i := end - 1; i >= start; i-- {
		e := rows[i]
		page = append(page, eventRow{Sequence: e.Sequence, At: time.UnixMilli(e.TimestampMs).In(loc), Kind: e.Kind, Data: e.Data})
	}
	if start > 0 {
		older = strconv.FormatUint(rows[start].Sequence, 10)
	}
	if end < len(rows) {
		if n := end + EventsPerPage; n < len(rows) {
			newer = strconv.FormatUint(rows[n].Sequence, 10)
		} else {
			newer = "" // the newest page
		}
	}
	return page, older, newer, end == len(rows)
}

// verifyCommand is the command that verifies the ledger against v's
// chain head.
func verifyCommand(db string, v *view.Project) string {
	if db == "" {
		db = "PATH"
	} else {
		db = view.ShellQuote(db)
	}
	return "scv ledger verify --db " + db + " --head " + view.ShellQuote(v.ID+"="+v.ChainHead)
}

// reportFile is the project's HTML report, as a file to save.
func (s *Server) reportFile(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, err := s.Ledger.Project(ctx, r.PathValue("ref"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rows, _, _, err := s.events.get(ctx, s.Ledger, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.nowFor(p)
	var b bytes.Buffer
	opts := view.ReportOptions{Options: view.Options{Now: now, StaleAfter: s.StaleAfter}, DB: s.DB, Version: s.Version}
	if err := view.Report(&b, p, rows, opts); err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="scv-report-`+safeFileName(p.ID)+`.html"`)
	w.Write(b.Bytes())
}

func safeFileName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

// retry starts a failed task over (project_task_retry, by AnsweredBy)
// and goes back to its project.
func (s *Server) retry(w http.ResponseWriter, r *http.Request) {
	if s.Handler == nil {
		http.Error(w, "404 not found: this daemon offers no retry", http.StatusNotFound)
		return
	}
	ctx := r.Context()
	p, err := s.Ledger.Project(ctx, r.PathValue("ref"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	retry := api.CmdProjectTaskRetry{Project: p.ID, Task: r.PathValue("task")}
	if _, err := s.Handler.Handle(api.WithCaller(ctx, AnsweredBy), retry); err != nil {
		s.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/p/"+url.PathEscape(p.ID), http.StatusSeeOther)
}

// Questions.

type questionItem struct {
	Q    api.Question
	Back string
}

type questionsPage struct {
	Pending, Decided []api.Question
}

// MaxDecidedShown is how many decided questions the questions page lists.
const MaxDecidedShown = 50

func (s *Server) questionsPage(w http.ResponseWriter, r *http.Request) {
	if s.Questions == nil {
		http.Error(w, "404 not found: this daemon asks no questions", http.StatusNotFound)
		return
	}
	ctx := r.Context()
	all, err := s.Questions.List(ctx, api.CmdConfirmList{})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var page questionsPage
	for _, q := range slices.Backward(all) {
		switch {
		case q.State == api.ConfirmPending:
			page.Pending = append(page.Pending, q)
		case len(page.Decided) < MaxDecidedShown:
			page.Decided = append(page.Decided, q)
		}
	}
	slices.Reverse(page.Pending) // oldest first: the first to run out
	q, err := s.questionsVersion(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.show(w, r, http.StatusOK, "questions", layout{Title: "Questions", Poll: "/api/version?page=questions", Version: q,
		Pending: len(page.Pending), Body: page})
}

// pending is the questions waiting for an answer, oldest first.
func (s *Server) pending(ctx context.Context) ([]api.Question, error) {
	all, err := s.Questions.List(ctx, api.CmdConfirmList{})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(q api.Question) bool { return q.State != api.ConfirmPending }), nil
}

func (s *Server) questionsVersion(ctx context.Context) (string, error) {
	if s.Questions == nil {
		return "0", nil
	}
	seq, err := s.qseq.latest(ctx, s.Questions)
	return strconv.FormatUint(seq, 10), err
}

// answer records the owner's answer (Questions.Answer, by AnsweredBy)
// and goes back to the page it came from (back: /questions or a
// project's page).
func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	if s.Questions == nil {
		http.Error(w, "404 not found: this daemon asks no questions", http.StatusNotFound)
		return
	}
	var yes bool
	switch r.PostFormValue("answer") {
	case "yes":
		yes = true
	case "no":
	default:
		http.Error(w, `400 bad request: answer must be "yes" or "no"`, http.StatusBadRequest)
		return
	}
	if _, err := s.Questions.Answer(r.Context(), r.PathValue("id"), yes, AnsweredBy); err != nil {
		s.fail(w, r, err)
		return
	}
	http.Redirect(w, r, backTo(r.PostFormValue("back")), http.StatusSeeOther)
}

// backTo is where a write sends the browser back to: a project's page or
// the questions page, never anywhere else.
func backTo(back string) string {
	if id, ok := strings.CutPrefix(back, "/p/"); ok && id != "" && safeFileName(id) == id {
		return back
	}
	return "/questions"
}

// The version the pages poll.

func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var ver string
	var err error
	q := r.URL.Query()
	switch q.Get("page") {
	case "projects":
		_, ver, err = s.projectsVersion(ctx)
	case "project":
		var p *reducer.Project
		if p, err = s.Ledger.Project(ctx, q.Get("id")); err == nil {
			var qv, wv string
			if qv, err = s.questionsVersion(ctx); err == nil {
				_, wv, err = s.projectWork(ctx, p)
			}
			ver = fmt.Sprintf("%d.%s%s%s", p.LastSequence, qv, s.projectAgentsVersion(s.listAgents(), p.ID), wv)
		}
	case "questions":
		ver, err = s.questionsVersion(ctx)
	case "agents":
		if s.Agents == nil {
			http.Error(w, "404 not found: this daemon runs no live agents", http.StatusNotFound)
			return
		}
		var qv string
		qv, err = s.questionsVersion(ctx)
		ver = agentsVersion(s.Agents.ListAgents(), s.now()) + "." + qv
	case "mail":
		if s.Mail == nil {
			http.Error(w, "404 not found: this daemon has no email accounts", http.StatusNotFound)
			return
		}
		var qv string
		qv, err = s.questionsVersion(ctx)
		ver = mailVersion(s.Mail.MailAccounts(), s.now()) + "." + qv
	default:
		http.Error(w, "400 bad request: page must be projects, project, questions, agents or mail", http.StatusBadRequest)
		return
	}
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, reducer.ErrNotFound) {
			code = http.StatusNotFound
		}
		http.Error(w, http.StatusText(code), code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"version": ver})
}

func (s *Server) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, ok := staticFiles[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	ctype := "text/css; charset=utf-8"
	if strings.HasSuffix(name, ".js") {
		ctype = "text/javascript; charset=utf-8"
	}
	w.Header().Set("Content-Type", ctype)
	w.Write(b)
}
