# vip's entry points. `make demo` and `make test` are the README's first two
# commands, as root or as a user with sudo; CI runs `make test` and
# `make release-check` as root.
GO         ?= go
# Where build writes vip.
BIN        ?= ./vip
# Runs the privileged steps (the lab, the test binaries) as root, through
# sudo unless root already; everything else, the build included, stays the
# user's, so no root-owned file lands in the checkout or the Go caches.
AS_ROOT    := $(CURDIR)/scripts/as-root.sh
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT     ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo none)
LDFLAGS    := -s -w -X github.com/vipctl/vip/internal/commands.version=$(VERSION) -X github.com/vipctl/vip/internal/commands.commit=$(COMMIT)
GORELEASER ?= $(shell command -v goreleaser 2>/dev/null || echo $(shell $(GO) env GOPATH)/bin/goreleaser)
GORELEASER_VERSION ?= v2.12.7

.PHONY: build demo test unit lab deps vet generate release-check goreleaser fuzz

# Without a C compiler Go quietly builds without cgo, and so without the
# capture: the check stops first (as root it installs them), and
# CGO_ENABLED=1 makes a build without cgo fail rather than succeed.
build:
	@./scripts/test-deps.sh build
	CGO_ENABLED=1 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/vip

deps:
	./scripts/test-deps.sh

# The sandbox failover, then the fleet's night of maintenance, each act
# proved by a capture on the client: labs of network namespaces, never the
# host's own interfaces. Each demo wants a lab of its own (a lab left up
# is removed first); the fleet lab stays up, and `sudo ./vip lab down`
# removes it.
demo: deps build
	$(AS_ROOT) $(BIN) lab down
	$(AS_ROOT) $(BIN) lab demo
	$(AS_ROOT) $(BIN) lab down
	$(AS_ROOT) $(BIN) lab demo --fleet

STATICCHECK_VERSION ?= v0.8.2

vet:
	$(GO) vet ./...
	GOFLAGS=-buildvcs=false $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: the files above need formatting"; exit 1; }

# The fast loop: every test in short mode (go test -short), as you, in about
# a minute on two cores once the build cache is warm. It covers the unit
# tests: the codecs, the scheduler and detectors on fake clocks, the engine
# over fake ports, the fleet against the fake store, the agent's API, the
# TUI, the goldens. It leaves to make lab every test that needs root, a lab
# of network namespaces, an outside program (etcd, tcpdump, arping, clang) or
# a built vip binary: in short mode those skip, under CI=true too
# (labtest.SkipShort). It installs nothing and runs no vet (make vet does).
unit:
	$(GO) test -short -count=1 ./...

# The lab tests: every test as root, make test's first run (without vet
# and -race). The unit tests run beside them, about a minute more.
lab: deps
	@$(AS_ROOT) true
	$(GO) test -exec $(AS_ROOT) -count=1 -timeout 15m ./...

# Lab tests build network namespaces: they need root, and skip without it
# (under CI=true they fail instead), so the test binaries, compiled as the
# user, run as root. sudo asks for a password once, before the first.
# The second run is under the race detector, the lab's vip binary included.
test: deps vet
	@$(AS_ROOT) true
	$(GO) test -exec $(AS_ROOT) -count=1 -timeout 15m ./...
	$(GO) test -exec $(AS_ROOT) -race -count=1 -timeout 15m ./...

# A short run of every fuzzer (the committed seeds run in every go test),
# counted in executions, about five seconds each (CI's whole run must stay
# under 30 minutes): a run bounded by time can
# end on a spurious "context deadline exceeded" from the fuzzing engine.
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 300000x ./internal/wire
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 100000x ./sniff
	$(GO) test -run '^$$' -fuzz '^FuzzClaimRequestValidate$$' -fuzztime 15000x ./internal/agent
	$(GO) test -run '^$$' -fuzz '^FuzzWriteJSON$$' -fuzztime 5000x ./internal/agent
	$(GO) test -run '^$$' -fuzz '^FuzzAppendIndented$$' -fuzztime 100000x ./internal/agent
	$(GO) test -run '^$$' -fuzz '^FuzzServerRequest$$' -fuzztime 10000x ./internal/agent
	$(GO) test -run '^$$' -fuzz '^FuzzServerEngine$$' -fuzztime 10000x ./internal/agent

# The completions, the man pages, the command reference (docs/cli) and the
# README's table of exit codes.
generate:
	$(GO) generate ./completions ./man ./docs/cli
	$(GO) test ./internal/commands -run '^TestREADMEExitCodes$$' -update

goreleaser:
	@test -x $(GORELEASER) || GOFLAGS=-buildvcs=false $(GO) install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION)

# The release configuration is valid and a snapshot of every package builds.
release-check: goreleaser
	./scripts/release-deps.sh
	$(GORELEASER) check
	$(GORELEASER) release --snapshot --clean

# Benchmarks: the Go benchmarks of the hot paths (go test -bench -benchmem
# ./announce ./sniff), then the same load against the kernel and against vip
# on a lab segment; writes BENCHMARKS.md. Needs root, like the lab tests.
# `make bench BENCHFLAGS=-short` takes about 3 minutes; the driver runs as
# root (through sudo when not root), like the test binaries. BENCHFLAGS is
# taken as written ($(value)): a pattern such as -run ^fleet$ keeps its $.
.PHONY: bench
bench: deps
	$(GO) run -exec $(AS_ROOT) ./tools/vipbench $(value BENCHFLAGS)

# The fault-injection suite, long: TestNemesis for DURATION on the socket,
# tcx and XDP generic responders (a seeded schedule of freezes, kills,
# partitions, etcd leader kills and outages, moves, take-overs and
# releases; SEED=N reproduces a run), then its tables go into
# RELIABILITY.md between the nemesis markers. The short run is part of
# `make test`.
DURATION ?= 30m
SEED     ?=
.PHONY: nemesis
nemesis: deps
	@$(AS_ROOT) true
	rm -f nemesis-report.md
	status=0; \
	VIP_NEMESIS_DURATION=$(DURATION) VIP_NEMESIS_SEED=$(SEED) VIP_NEMESIS_REPORT=$(CURDIR)/nemesis-report.md \
		$(GO) test -exec '$(AS_ROOT) env VIP_NEMESIS_DURATION=$(DURATION) VIP_NEMESIS_SEED=$(SEED) VIP_NEMESIS_REPORT=$(CURDIR)/nemesis-report.md' \
		-count=1 -timeout 4h -parallel 3 -run '^TestNemesis$$' -v ./test/e2e || status=$$?; \
	test -s nemesis-report.md && \
	awk 'FNR==NR { r = r $$0 "\n"; next } /<!-- nemesis:begin -->/ { print; printf "%s", r; skip = 1; next } /<!-- nemesis:end -->/ { skip = 0 } !skip' \
		nemesis-report.md RELIABILITY.md > RELIABILITY.md.new && mv RELIABILITY.md.new RELIABILITY.md; \
	rm -f nemesis-report.md; exit $$status
