# Tessera's entry points. `make demo` and `make test` each do all the set-up on a fresh machine.
SHELL := /bin/bash
BUILD ?= build
# The sanitizer build (clang, ASan + UBSan + libFuzzer's coverage): the unit and CLI tests run
# under the sanitizers there, and the fuzz targets are built and run from the same objects.
SAN_BUILD ?= build-sanitize
TSAN_BUILD ?= build-tsan
# clang-tidy's compile commands: a tree without precompiled headers (clang-tidy cannot read GCC's),
# configured and given its generated protobuf headers, never compiled in full.
LINT_BUILD ?= build-lint
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 20
# A fixed seed makes the fuzz step in `make test` explore the same inputs on every run (a slower
# machine a prefix of them), so CI is a regression gate; FUZZ_SEED=0 draws a new seed to explore.
FUZZ_SEED ?= 1
CMAKE_FLAGS ?=
SOURCES = $(shell find src bench tests -name '*.h' -o -name '*.cc' 2>/dev/null)

.PHONY: deps build demo test unit test-sanitize test-tsan test-fuzz check-format bench fmt lint clean

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

$(SAN_BUILD)/build.ninja:
	CXX=clang++ cmake -S . -B $(SAN_BUILD) -G Ninja -DTESSERA_FUZZ=ON -DTESSERA_BENCHMARKS=OFF \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo

test-sanitize: $(SAN_BUILD)/build.ninja
	ninja -C $(SAN_BUILD) -j $(JOBS) tessera_unit_tests tessera
	cd $(SAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS)

# ThreadSanitizer over every unit and CLI test (not part of `make test`, which it would lengthen
# by half: on 2 cores on 2026-12-06, 4 min 1 s to build from a clean tree and 3 min 36 s of tests,
# while `make test` took 15 min 10 s from a clean clone). Warnings are not errors there: GCC 12
# warns of uninitialised values under -fsanitize=thread that the normal build does not have. A
# report from any process, a server a CLI test started included, is written under
# $(TSAN_BUILD)/tsan-reports and fails it.
$(TSAN_BUILD)/build.ninja:
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DTESSERA_TSAN=ON -DTESSERA_BENCHMARKS=OFF \
	  -DTESSERA_WERROR=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo

test-tsan: deps $(TSAN_BUILD)/build.ninja
	ninja -C $(TSAN_BUILD) -j $(JOBS) tessera_unit_tests tessera
	scripts/tsan-suppressions $(TSAN_BUILD) > $(TSAN_BUILD)/tsan.supp
	rm -rf $(TSAN_BUILD)/tsan-reports && mkdir -p $(TSAN_BUILD)/tsan-reports
	cd $(TSAN_BUILD) && TSAN_OPTIONS="suppressions=$(abspath $(TSAN_BUILD))/tsan.supp log_path=$(abspath $(TSAN_BUILD))/tsan-reports/report" \
	  ctest --output-on-failure -j $(JOBS)
	@if [ -n "$$(ls -A $(TSAN_BUILD)/tsan-reports)" ]; then \
	  cat $(TSAN_BUILD)/tsan-reports/*; echo "test-tsan: ThreadSanitizer reports above"; exit 1; fi
	@echo "test-tsan: no ThreadSanitizer report"

# scripts/run-fuzzers builds the fuzzers; each runs FUZZ_SECONDS on its seed corpus
# (tests/fuzz/corpus/NAME), JOBS at a time, and a crash fails the run.
test-fuzz: $(SAN_BUILD)/build.ninja
	@scripts/run-fuzzers $(SAN_BUILD) $(FUZZ_SECONDS) $(FUZZ_SEED) $(JOBS)

check-format:
	@clang-format --dry-run -Werror $(SOURCES) && echo "clang-format: clean"

bench: deps build
	bench/run-all $(BUILD)

fmt:
	clang-format -i $(SOURCES)

$(LINT_BUILD)/build.ninja:
	cmake -S . -B $(LINT_BUILD) -G Ninja -DTESSERA_PCH=OFF -DTESSERA_UNITY=OFF $(CMAKE_FLAGS)

lint: check-format $(LINT_BUILD)/build.ninja
	ninja -C $(LINT_BUILD) gen/externalscaler.pb.h
	bash -o pipefail -c "find src -name '*.cc' | sort | xargs -P $(JOBS) -n 8 \
	  clang-tidy -p $(LINT_BUILD) --quiet --warnings-as-errors='*' 2>&1 | \
	  sed '/^[0-9]* warnings\? generated\.$$/d'"
	@echo "clang-tidy: clean"

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(TSAN_BUILD) $(LINT_BUILD) out
