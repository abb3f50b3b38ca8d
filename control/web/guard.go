package web

import (
	"cmp"
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
)

// The Content-Security-Policy of every answer: the daemon itself only.
const csp = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// Why a request was refused, as /metrics counts it.
const (
	refusedHost   = "host"
	refusedToken  = "token"
	refusedOrigin = "origin"
)

// secure headers every answer carries, refusals included.
func secure(h http.Header) {
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: under no-referrer a browser sends
	// "Origin: null" with its POSTs, which the origin check refuses.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// statusWriter keeps the status an answer was given.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// guard is SPEC §7 in front of every handler, in this order:
//
//  1. the secure headers, on every answer;
//  2. the Host header must name the address listened on (127.0.0.1:P,
//     [::1]:P, or localhost:P): a page of another site whose name was
//     made to resolve to 127.0.0.1 (DNS rebinding) sends its own name and
//     is refused (421);
//  3. the token: an Authorization: Bearer header, or the UI's cookie,
//     or once, on a GET, ?token= in the URL, which is traded for the
//     cookie (HttpOnly, SameSite=Strict) and a redirect to the same URL
//     without it. Without a valid one: 401, and a body that says nothing
//     of the ledger;
//  4. a write (POST, the only method besides GET and HEAD) must come
//     with an Origin header naming the UI itself (403 otherwise), and a
//     body of at most 64 KiB.
//
// /mcp, the Model Context Protocol's endpoint, is for programs, not
// pages: its token must come in the Authorization header (a browser's
// cookie does not open it), and its requests may come without an Origin
// (programs send none) but never with another (a page of another site
// in the owner's browser); it takes DELETE too (a session's end).
//
// No answer carries a CORS header.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secure(w.Header())
		if !s.hosts[r.Host] {
			s.refuse(w, r, refusedHost, http.StatusMisdirectedRequest, "refused: this server answers only to http://"+s.addr+"/\n")
			return
		}
		mcp := r.URL.Path == "/mcp"
		switch a := s.authorize(r); {
		case mcp && a != authBearer:
			s.refuse(w, r, refusedToken, http.StatusUnauthorized, "401 unauthorized: /mcp needs the token of the daemon's web UI in an Authorization: Bearer header.\n")
			return
		case a == authNone:
			s.refuse(w, r, refusedToken, http.StatusUnauthorized, "401 unauthorized: this page needs the token of the daemon's web UI. `scv ui` prints the address to open.\n")
			return
		case a == authURL:
			s.trade(w, r)
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodPost, http.MethodDelete:
			if r.Method == http.MethodDelete && !mcp {
				w.Header().Set("Allow", "GET, HEAD, POST")
				http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
				return
			}
			if o := r.Header.Get("Origin"); !s.origin[o] && !(mcp && o == "") {
				s.refuse(w, r, refusedOrigin, http.StatusForbidden, "403 forbidden: a write must come from the UI's own pages (Origin "+strings.TrimSuffix(s.base(), "/")+").\n")
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		default:
			w.Header().Set("Allow", "GET, HEAD, POST")
			http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		s.Metrics.HTTPRequest(cmp.Or(sw.code, http.StatusOK))
	})
}

type auth int

const (
	authNone   auth = iota
	authBearer      // Authorization: Bearer
	authCookie      // the UI's cookie
	authURL         // ?token= on a GET, to trade for the cookie
)

// authorize says how r carries a valid token, if it does. A wrong token
// anywhere refuses the request, even with a right one elsewhere.
func (s *Server) authorize(r *http.Request) auth {
	got := authNone
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || !s.valid(tok) {
			return authNone
		}
		got = authBearer
	}
	if c, err := r.Cookie(s.cookie); err == nil && got == authNone {
		if !s.valid(c.Value) {
			return authNone
		}
		got = authCookie
	}
	if q := r.URL.Query(); q.Has("token") {
		if !s.valid(q.Get("token")) || len(q["token"]) != 1 {
			return authNone
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			return authURL
		}
	}
	return got
}

func (s *Server) valid(tok string) bool {
	return len(tok) == len(s.token) && subtle.ConstantTimeCompare([]byte(tok), []byte(s.token)) == 1
}

// trade sets the cookie for a valid ?token= and redirects to the same
// URL without it, so that the token leaves the address bar and history.
func (s *Server) trade(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	q := r.URL.Query()
	q.Del("token")
	u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
	if !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") || strings.Contains(u.Path, `\`) {
		u.Path = "/" // never a redirect off this origin
	}
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
	s.Metrics.HTTPRequest(http.StatusSeeOther)
}

// refuse answers a refused request with code and text alone.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, reason string, code int, text string) {
	s.Metrics.HTTPRefused(reason)
	s.logger().Debug("web UI request refused", "reason", reason, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		w.Write([]byte(text))
	}
}
