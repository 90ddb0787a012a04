# vip's build and test entry points. `sudo make test` is what CI runs.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo none)
LDFLAGS := -s -w -X github.com/vipctl/vip/cmd.version=$(VERSION) -X github.com/vipctl/vip/cmd.commit=$(COMMIT)

.PHONY: build test deps vet generate

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o vip ./cmd/vip

deps:
	./scripts/test-deps.sh

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: the files above need formatting"; exit 1; }

# Lab tests build network namespaces: they need root, and skip without it
# (under CI=true they fail instead).
test: deps vet
	$(GO) test -count=1 -timeout 15m ./...

generate:
	$(GO) generate ./...
