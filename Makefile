# scv: the event-sourced project ledger daemon.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)
LDFLAGS := -X main.version=$(VERSION)
BIN     := bin/scv

.PHONY: all build run test bench verify clean

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

## verify: check formatting and that go.mod is tidy
verify:
	@test -z "$$(gofmt -l .)" || (echo "gofmt would change:"; gofmt -l .; exit 1)
	$(GO) mod tidy -diff

clean:
	rm -rf bin
