# payrecon. `make test` and `make demo` work on a fresh Debian machine: scripts/with-services.sh
# uses the PostgreSQL, Redis and NATS (JetStream) at RECONCILER_TEST_DATABASE_URL /
# RECONCILER_TEST_REDIS_URL / RECONCILER_TEST_NATS_URL (default: the standard local ports) or
# starts private throwaway servers.
GO       ?= go
SERVICES := scripts/with-services.sh
PKGS     := ./...

.PHONY: all build test test-deps demo vet fmt-check bench soak clean screenshots sim

all: build

build:
	$(GO) build -o bin/reconciler ./cmd/reconciler

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

# The signature tests cross-check against the openssl command; the alert rules are checked
# with promtool (Debian package prometheus); the console's browser test drives Debian's chromium,
# whose screenshots of the Chinese pages need a CJK font. Install them where missing, starting
# no service.
test-deps:
	@scripts/need-debs.sh openssl:openssl promtool:prometheus chromium:chromium \
		/usr/share/fonts/truetype/wqy/wqy-microhei.ttc:fonts-wqy-microhei

# Every test, with the race detector, against real PostgreSQL, Redis and NATS. The seeded
# simulation runs after the rest, alone: it holds dozens of database sessions that the other
# packages' tests would otherwise compete for. It runs a count of seeds, never a time budget
# (a SIM_BUDGET or SIM_SEEDS in the environment does not shorten it).
SIM_PKG := ./internal/sim
test: fmt-check vet test-deps
	$(SERVICES) sh -c '$(GO) test -race -count=1 -timeout 15m $$($(GO) list $(PKGS) | grep -v "/internal/sim$$") && \
		SIM_SEEDS=1000 SIM_BUDGET= $(GO) test -race -count=1 -timeout 30m -v $(SIM_PKG)'

# A long simulation campaign (make test runs the short one): SIM_SEEDS seeds or SIM_BUDGET,
# whichever ends first; prints seeds run, faults injected by type and any violating seed.
SIM_SEEDS  ?= 100000
SIM_BUDGET ?= 60m
sim:
	SIM_SEEDS=$(SIM_SEEDS) SIM_BUDGET=$(SIM_BUDGET) $(SERVICES) $(GO) test -count=1 -timeout 0 -run Simulation -v ./internal/sim

# The whole story on this machine: sandbox, seeded orders, a pass racing callbacks, findings.
demo:
	$(SERVICES) $(GO) run ./cmd/reconciler demo

# Benchmarks against the real servers; each prints its figures (not timed tests).
#   ApplyResult:      applies/s and SQL statements per apply (fresh, duplicate callback)
#   RateLimit:        QPS held by 64 callers through one client against the sandbox (10 s)
#   Pass:             whole passes of `reconciler run` as a separate process vs the sandbox
#                     (Q=250, L=20ms, C=64 twice: orders only, then half the due work refunds)
#   RecheckSchedule:  24h of 5-minute passes: platform calls with the re-check schedule
#   Budget:           k = 1, 2, 4, 8 processes sharing one account's QPS, a fast account beside
#                     a 2 s one, and four processes against a separate sandbox process;
#                     NestedBudgets: a service provider's QPS over four sub-merchants, with
#                     and without budgets of their own
#   ProviderScale:    10,000 sub-merchants configured: work due for 20 (RSS, time) and for
#                     all of them (share of the provider's QPS)
#   WorkerCPU:        CPU per order of a budget-paced pass vs an unthrottled one, in-process
#                     (profile it: -bench WorkerCPU -cpuprofile cpu.out ./cmd/reconciler/)
#   PacingCPU:        the same ratio for a `reconciler run` process, a provider with one
#                     sub-merchant and with 2,000 (target: paced <= 1.2x unthrottled)
#   SigningPaced:     the floor under it: CPU per RSA-2048 signature of a process that only
#                     signs, 100/s in bunches and one per wake-up, against back to back
#   RelayThroughput:  100,000 outbox rows: relay msg/s next to bare JetStream async publish
#   RelayFollowLag:   relay --follow at 1,000 transitions/s: commit -> ack lag p50/p99
#   Read*:            bill readers, 100,000 generated lines per format: lines/s
#                     (peak RSS at any size: go run ./statement/internal/billrss -format alipay-zip -lines 1000000)
#   Statement:        statement --file of a 1,000,000-line Alipay bill against 1,000,000 orders:
#                     lines/s next to a bare COPY of the same lines, peak RSS of the run
#   Report:           a year's report of 100,000 findings from the database to io.Discard in
#                     csv, json, xlsx and html: seconds and peak RSS growth per format (the
#                     target is under 100 MiB each; -report.findings N for another size)
bench:
	$(SERVICES) sh -c '$(GO) test -run "^$$" -bench "ApplyResult" -benchmem -count=1 ./reconcile/ && \
	  $(GO) test -run "^$$" -bench "RateLimit" -benchtime 1x -count=1 ./sandbox/ && \
	  $(GO) test -run "^$$" -bench "SigningPaced" -benchtime 1x -count=1 ./platformclient/ && \
	  $(GO) test -run "^$$" -bench "Pass|RecheckSchedule|Budget|WorkerCPU|PacingCPU|ProviderScale" -benchtime 1x -count=1 -timeout 60m ./reconcile/ ./cmd/reconciler/ && \
	  $(GO) test -run "^$$" -bench "Relay" -benchtime 1x -count=1 -timeout 20m ./relay/ && \
	  $(GO) test -run "^$$" -bench "Read" -benchtime 3x -benchmem -count=1 ./statement/ && \
	  $(GO) test -run "^$$" -bench "Statement" -benchtime 3x -count=1 -timeout 30m -v ./statementrun/ -statement.lines 1000000 && \
	  $(GO) test -run "^$$" -bench "Report" -benchtime 1x -count=1 -timeout 20m ./render/'

# The review console as a person sees it: the browser tests' screenshots (the findings list and its third page,
# a finding after maker-checker, the HTML report) kept under out/screenshots; it prints their paths.
screenshots: test-deps
	mkdir -p out/screenshots
	$(SERVICES) $(GO) test -count=1 -v -run '^TestBrowser' -artifacts -outputdir $(CURDIR)/out/screenshots ./console/ | grep -E 'screenshot:|^(ok|FAIL|---)'

# The kill -9 soak, long: run and serve SIGKILLed at random moments under a callback storm,
# a clean run after each, the invariants checked every time (`make test` runs 10
# iterations). SOAK_SEED=N replays one schedule of kills.
SOAK_ITERATIONS ?= 200
soak:
	$(SERVICES) env SOAK_ITERATIONS=$(SOAK_ITERATIONS) $(GO) test -race -count=1 -timeout 120m -v -run '^TestE2ESoakKill9$$' ./cmd/reconciler/

clean:
	rm -rf bin out
