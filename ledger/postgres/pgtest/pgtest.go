// Package pgtest gives tests a fresh PostgreSQL database of their own on
// the server named by $SCV_TEST_PG (a URL whose role may create
// databases), and drops it when the test ends. With $SCV_TEST_PG unset,
// the test is skipped with a message saying how to run it, unless
// $SCV_REQUIRE_PG is set (as .ci/run sets it), when it fails: there, a
// missing server is a broken CI, not a reason to skip.
//
// `make pg` (or .ci/run) starts a private cluster and prints the URL.
package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Env names the server's URL; RequireEnv, set, makes its absence fail.
const (
	Env        = "SCV_TEST_PG"
	RequireEnv = "SCV_REQUIRE_PG"
)

var seq atomic.Int64

// Server is the admin URL of the test server, or skips (or fails) t.
func Server(t testing.TB) string {
	t.Helper()
	u := os.Getenv(Env)
	if u == "" {
		msg := "no PostgreSQL for this test: set " + Env + " to a server URL whose role may create databases " +
			"(`make pg` starts a private cluster and prints one)"
		if os.Getenv(RequireEnv) != "" {
			t.Fatal(msg + "; " + RequireEnv + " is set, so this is a failure")
		}
		t.Skip(msg)
	}
	return u
}

// Database creates a fresh database on the test server and returns its
// URL; it is dropped when the test ends.
func Database(t testing.TB) string {
	t.Helper()
	admin := Server(t)
	name := fmt.Sprintf("scvtest_%d_%d", os.Getpid(), seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to %s: %v", Env, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Logf("drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop database %s: %v", name, err)
		}
	})
	return WithDatabase(admin, name)
}

// WithDatabase is the URL u naming database name instead.
func WithDatabase(u, name string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	p.Path = "/" + strings.TrimPrefix(name, "/")
	return p.String()
}

// Exec runs statements on the database at u, for tests that tamper with
// what the driver wrote (as a careless hand would).
func Exec(t testing.TB, u string, statements ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	for _, s := range statements {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}
