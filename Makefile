# payrecon. `make test` and `make demo` work on a fresh Debian machine: scripts/with-services.sh
# uses the PostgreSQL and Redis at RECONCILER_TEST_DATABASE_URL / RECONCILER_TEST_REDIS_URL
# (default: the standard local ports) or starts private throwaway servers.
GO       ?= go
SERVICES := scripts/with-services.sh
PKGS     := ./...

.PHONY: all build test demo vet fmt-check bench clean

all: build

build:
	$(GO) build -o bin/reconciler ./cmd/reconciler

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

# Every test, with the race detector, against real PostgreSQL and Redis.
test: fmt-check vet
	$(SERVICES) $(GO) test -race -count=1 -timeout 15m $(PKGS)

# The whole story on this machine: sandbox, seeded orders, a pass racing callbacks, findings.
demo:
	$(SERVICES) $(GO) run ./cmd/reconciler demo

# Go benchmarks against the real servers; they print their figures.
bench:
	$(SERVICES) $(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 30m $(PKGS)

clean:
	rm -rf bin
