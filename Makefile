# scv: the event-sourced project ledger daemon.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)
LDFLAGS := -X main.version=$(VERSION)
BIN     := bin/scv

.PHONY: all build run test fuzz bench reliability verify clean pg fleet FORCE

all: build

## build: compile bin/scv with the version stamped, and bin/acpagent, a scripted ACP agent to try live agents with (docs/agents.md)
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/scv
	$(GO) build -o bin/acpagent ./cmd/internal/acpagent

## run: start the daemon on the embedded default (SQLite under the user's state directory) with the web UI on a free loopback port (its address with the token is logged; scv ui prints it)
run: build
	./$(BIN) daemon --http 127.0.0.1:0

## test: vet, run every test with the race detector, then fuzz each target for FUZZTIME_SHORT
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m ./...
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT)

## pg: start a private PostgreSQL cluster in bin/pg (Debian's postgresql package) and print its URL; the fleet tests run against it with SCV_TEST_PG=URL
pg: bin/scvpg
	@bin/scvpg start bin/pg

## fleet: build, then start a private PostgreSQL cluster and two daemons sharing one ledger on it, until Ctrl-C (README: a fleet)
fleet: build bin/scvpg
	bin/scvpg fleet bin/fleet/pg

# scvpg is built, not run with `go run`, because `go run` exits 1 when
# Ctrl-C stops the program it ran, and make would report the stop as a
# failure.
bin/scvpg: FORCE
	$(GO) build -o $@ ./cmd/scvpg

## bench: measure the daemon against same-run baselines (docs/performance.md)
bench:
	$(GO) run ./cmd/scvbench -o bin/bench.json

# The fuzz targets of ./control: `make fuzz` runs each for FUZZTIME (10
# minutes in `make reliability`, FUZZTIME_SHORT in `make test`), after its
# seeds and control/testdata/fuzz. `go test -fuzz` passes when no target
# matches, so the recipe first checks that each one exists.
FUZZ_TARGETS   := FuzzDecodeCommand FuzzParseLine FuzzDispatch FuzzBatchLine
FUZZTIME       ?= 10m
FUZZTIME_SHORT ?= 10s

## fuzz: fuzz each of FUZZ_TARGETS for FUZZTIME
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		$(GO) test -list "^$$t\$$" ./control | grep -x "$$t" >/dev/null || { echo "no fuzz target $$t in ./control"; exit 1; }; \
		echo "fuzz $$t for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) ./control || exit 1; \
	done

## reliability: the long reliability checks (docs/reliability.md): scvrel crash and readers, the crash check on PostgreSQL (skipped where it is not installed), the linear check under every fault kind (histories' pictures and daemons' logs in bin/linear), every TestReliability* test with SCV_LONG=1 (full log in bin/reliability.log), then make fuzz (each target for FUZZTIME)
reliability: SHELL := /bin/bash
reliability: .SHELLFLAGS := -o pipefail -ec
reliability:
	$(GO) run ./cmd/scvrel --long crash readers
	$(GO) run ./cmd/scvrel --long --pg crash
	$(GO) run ./cmd/scvrel --long --pg --pgbouncer crash
	$(GO) run ./cmd/scvrel --long --out bin/linear linear
	mkdir -p bin
	SCV_LONG=1 $(GO) test -count=1 -v -run '^TestReliability' ./... 2>&1 | tee bin/reliability.log | grep -E '^(=== RUN|--- |ok|FAIL|PASS)|RELIABILITY:'
	$(MAKE) --no-print-directory fuzz

## verify: check formatting and that go.mod is tidy
verify:
	@test -z "$$(gofmt -l .)" || (echo "gofmt would change:"; gofmt -l .; exit 1)
	$(GO) mod tidy -diff

clean:
	rm -rf bin

FORCE:
