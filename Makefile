# moq-edge: the two commands of README.md are `make run` and `make test`.
CARGO ?= cargo
ARGS ?=

.PHONY: run test deps fmt bench fuzz-build

deps:
	@./.ci/install-deps

## Build and start the relay on the embedded defaults (UDP [::]:4443, self-signed certificate).
run: deps
	$(CARGO) run --release --bin moq-edge -- $(ARGS)

## Every check: formatting, lints as errors, the whole test suite.
test: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --all-targets -- -D warnings
	$(CARGO) test --all-targets
	$(CARGO) test --doc
	CARGO_TARGET_DIR=$(CURDIR)/target $(CARGO) check --manifest-path fuzz/Cargo.toml

fmt:
	$(CARGO) fmt --all

## Criterion micro-benchmarks of the wire codec (see bench/README.md).
bench: deps
	$(CARGO) bench --bench wire

## Build the cargo-fuzz targets (needs nightly and cargo-fuzz; see fuzz/README.md).
fuzz-build:
	cd fuzz && cargo +nightly fuzz build
