# moq-edge: the two commands of README.md are `make run` and `make test`.
CARGO ?= cargo
ARGS ?=

.PHONY: run test deps fmt web bench bench-wire fuzz-build

deps:
	@./.ci/install-deps

## Build and start the relay on the embedded defaults (UDP [::]:4443, self-signed certificate).
run: deps
	$(CARGO) run --release --bin moq-edge -- $(ARGS)

## Every check: formatting, lints as errors, the whole test suite.
test: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc
	CARGO_TARGET_DIR=$(CURDIR)/target $(CARGO) check --manifest-path fuzz/Cargo.toml

fmt:
	$(CARGO) fmt --all

## Rebuild the watch page's bundle in web/dist/ (the relay embeds it; commit it) from web/src/
## and the packages web/package-lock.json pins. `make test` checks that it is up to date.
web: deps
	cd web && npm run build

## Start the relay and run the default moq-bench fan-out against it (see bench/README.md).
## Another scenario: make bench BENCH_ARGS="churn --subscribers 50".
bench: deps
	bench/run.sh $(BENCH_ARGS)

## Criterion micro-benchmarks of the wire codec and the QUIC bulk transfer.
bench-wire: deps
	$(CARGO) bench --bench wire
	$(CARGO) bench --bench bulk

## Build the cargo-fuzz targets (needs nightly and cargo-fuzz; see fuzz/README.md).
fuzz-build:
	cd fuzz && cargo +nightly fuzz build
