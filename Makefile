# manad — build, test and benchmark targets. `make help` lists them.

GO        ?= go
PREFIX    ?= /usr/local
DESTDIR   ?=
BINDIR    := $(PREFIX)/bin
BIN       := bin
GOFLAGS_TEST ?= -race -count=1 -timeout 40m
FUZZTIME  ?= 10s

.PHONY: help build test vet lint bench fuzz run clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 14

build: ## build bin/manad and bin/manactl (once those commands exist)
	@mkdir -p $(BIN)
	@for c in manad manactl; do \
		if [ -d cmd/$$c ]; then $(GO) build -o $(BIN)/$$c ./cmd/$$c || exit 1; fi; \
	done

test: ## run the whole test suite with the race detector (root-only tests skip unless root; CI=true makes them mandatory)
	$(GO) test $(GOFLAGS_TEST) ./...

vet: ## go vet and staticcheck
	$(GO) vet ./...
	staticcheck ./...

bench: ## run every benchmark and print the figures with their baselines and targets
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./...

run: build ## start manad with its embedded default configuration (needs root)
	@test -x $(BIN)/manad || { echo "cmd/manad is not built yet (issue 4)"; exit 1; }
	$(BIN)/manad

clean: ## remove build output
	rm -rf $(BIN)
