# Tessera's entry points. `make demo` and `make test` each do all the set-up on a fresh machine.
SHELL := /bin/bash
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 20
# A fixed seed makes the fuzz step in `make test` explore the same inputs on every run (a slower
# machine a prefix of them), so CI is a regression gate; FUZZ_SEED=0 draws a new seed to explore.
FUZZ_SEED ?= 1
CMAKE_FLAGS ?=
SOURCES = $(shell find src bench tests -name '*.h' -o -name '*.cc' 2>/dev/null)

.PHONY: deps build demo test unit test-sanitize test-fuzz check-format bench fmt lint clean

deps:
	@scripts/setup-deps

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: $(BUILD)/build.ninja
	ninja -C $(BUILD) -j $(JOBS)

demo: deps build
	$(BUILD)/bin/tessera plan --fleet examples/fleet.yaml --workloads examples/workloads.yaml \
	  --out out/demo-plan; rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 2 ]

# Unit tests, CLI tests, the sanitizer build, a short fuzz run and the format check.
test: deps build unit test-sanitize test-fuzz check-format
	@echo "make test: all suites passed"

unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

$(ASAN_BUILD)/build.ninja:
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DTESSERA_SANITIZE=ON -DTESSERA_BENCHMARKS=OFF \
	  -DCMAKE_BUILD_TYPE=Debug

test-sanitize: $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD) -j $(JOBS) tessera_unit_tests tessera
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS)

$(FUZZ_BUILD)/build.ninja:
	CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja -DTESSERA_FUZZ=ON -DTESSERA_BENCHMARKS=OFF \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo

# scripts/run-fuzzers builds the fuzzers; each runs FUZZ_SECONDS on its seed corpus
# (tests/fuzz/corpus/NAME), JOBS at a time, and a crash fails the run.
test-fuzz: $(FUZZ_BUILD)/build.ninja
	@scripts/run-fuzzers $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_SEED) $(JOBS)

check-format:
	@clang-format --dry-run -Werror $(SOURCES) && echo "clang-format: clean"

bench: deps build
	bench/run-all $(BUILD)

fmt:
	clang-format -i $(SOURCES)

lint: check-format $(BUILD)/build.ninja
	clang-tidy -p $(BUILD) --quiet $(shell find src -name '*.cc' ! -name '*_test.cc' ! -name '*_benchmark.cc')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) out
