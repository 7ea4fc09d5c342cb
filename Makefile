# The two commands everything hangs on: `make demo` and `make check`.
# Both install what is missing (scripts/deps.sh), configure and build.

BUILD      ?= build
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
CTEST_ARGS ?=

.PHONY: all deps build demo check check-fast check-main check-sanitize check-asan check-tsan check-fuzz bench clean

all: build

deps:
	@scripts/deps.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSOFTVERBS_WERROR=ON $(CMAKE_ARGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/softverbs demo

# Two tiers of tests.
#   check-fast  the main build's unit tests and a representative part of the
#               integration and conformance suites (ctest label `fast`), for
#               every change: well under 3 minutes on 2 cores once built.
#   check       everything: every ctest entry of the main build (check-main),
#               then the ASan+UBSan run, the TSan run and the fuzzers side by
#               side (each builds its own tree; output comes a target at a time).
# check-main runs alone: its perftest and pingpong pairs busy-poll both cores.
FUZZ_SECONDS ?= 60
CTEST      := ctest --output-on-failure -j 2
# The sanitizer entries mostly wait on their children: four at a time.
SANITIZE_CTEST := ctest --output-on-failure -j 4

check: check-main
	$(MAKE) --no-print-directory -j 3 --output-sync=target check-asan check-tsan check-fuzz

check-fast: build
	$(CTEST) --test-dir $(BUILD) --timeout 300 -L '^fast$$' $(CTEST_ARGS)

check-main: build
	$(CTEST) --test-dir $(BUILD) --timeout 300 $(CTEST_ARGS)

check-sanitize: check-asan check-tsan

$(BUILD)-asan/build.ninja: | deps
	cmake -S . -B $(BUILD)-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSOFTVERBS_WERROR=ON \
	      -DSOFTVERBS_SANITIZE=address -DSOFTVERBS_TESTS_ONLY=ON $(CMAKE_ARGS)

$(BUILD)-tsan/build.ninja: | deps
	cmake -S . -B $(BUILD)-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSOFTVERBS_WERROR=ON \
	      -DSOFTVERBS_SANITIZE=thread -DSOFTVERBS_TESTS_ONLY=ON $(CMAKE_ARGS)

check-asan: deps $(BUILD)-asan/build.ninja
	cmake --build $(BUILD)-asan -j $(JOBS)
	$(SANITIZE_CTEST) --test-dir $(BUILD)-asan --timeout 600 -L sanitize $(CTEST_ARGS)

check-tsan: deps $(BUILD)-tsan/build.ninja
	cmake --build $(BUILD)-tsan -j $(JOBS)
	$(SANITIZE_CTEST) --test-dir $(BUILD)-tsan --timeout 600 -L sanitize $(CTEST_ARGS)

# The wire parser and the responder under libFuzzer (clang), for a bounded
# time; findings fail.
check-fuzz: deps
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(BUILD)-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	      -DSOFTVERBS_WERROR=ON -DSOFTVERBS_FUZZ=ON -DSOFTVERBS_TESTS_ONLY=ON $(CMAKE_ARGS)
	tests/fuzz/run_fuzz.sh $(BUILD)-fuzz $(FUZZ_SECONDS)

# softverbs against its peers (UCX, libfabric) and the machine's limits:
# bench/results/<UTC>.json, docs/PERFORMANCE.md, docs/perf/bw_vs_size.png.
# Debian's python3 (python3-matplotlib draws the plot), not whatever is first on PATH.
BENCH_PYTHON ?= /usr/bin/python3
BENCH_ARGS   ?=

bench: build
	SOFTVERBS_BENCH_VIA="make bench" $(BENCH_PYTHON) bench/run.py --build $(BUILD) $(BENCH_ARGS)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(BUILD)-fuzz
