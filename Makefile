# scv: the event-sourced project ledger daemon.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)
LDFLAGS := -X main.version=$(VERSION)
BIN     := bin/scv

.PHONY: all build run test bench reliability verify clean

all: build

## build: compile bin/scv with the version stamped
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/scv

## run: start the daemon on the embedded default (SQLite under the user's state directory)
run: build
	./$(BIN) daemon

## test: vet and run every test with the race detector
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

## bench: measure the daemon against same-run baselines (docs/performance.md)
bench:
	$(GO) run ./cmd/scvbench -o bin/bench.json

# The fuzz targets of ./control that `make reliability` runs, each for
# FUZZTIME. `go test -fuzz` passes when no target matches, so the recipe
# first checks that each one exists.
FUZZ_TARGETS := FuzzDecodeCommand FuzzParseLine FuzzDispatch
FUZZTIME     ?= 10m

## reliability: the long reliability checks (docs/reliability.md): scvrel crash and readers, every TestReliability* test with SCV_LONG=1 (full log in bin/reliability.log), then each of FUZZ_TARGETS for FUZZTIME
reliability: SHELL := /bin/bash
reliability: .SHELLFLAGS := -o pipefail -ec
reliability:
	$(GO) run ./cmd/scvrel --long crash readers
	mkdir -p bin
	SCV_LONG=1 $(GO) test -count=1 -v -run '^TestReliability' ./... 2>&1 | tee bin/reliability.log | grep -E '^(=== RUN|--- |ok|FAIL|PASS)|RELIABILITY:'
	for t in $(FUZZ_TARGETS); do \
		$(GO) test -list "^$$t\$$" ./control | grep -x "$$t" >/dev/null || { echo "no fuzz target $$t in ./control"; exit 1; }; \
		$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) ./control; \
	done

## verify: check formatting and that go.mod is tidy
verify:
	@test -z "$$(gofmt -l .)" || (echo "gofmt would change:"; gofmt -l .; exit 1)
	$(GO) mod tidy -diff

clean:
	rm -rf bin
