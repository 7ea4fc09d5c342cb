# The two commands everything hangs on: `make demo` and `make check`.
# Both install what is missing (scripts/deps.sh), configure and build.

BUILD      ?= build
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
CTEST_ARGS ?=

.PHONY: all deps build demo check check-fast check-sanitize check-asan check-tsan check-fuzz bench clean

all: build

deps:
	@scripts/deps.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSOFTVERBS_WERROR=ON $(CMAKE_ARGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/softverbs demo

# Unit, integration and conformance tests, then the sanitizer and fuzzer runs.
FUZZ_SECONDS ?= 60

check: check-fast check-sanitize check-fuzz

check-fast: build
	ctest --test-dir $(BUILD) --output-on-failure --timeout 300 -j 2 $(CTEST_ARGS)

check-sanitize: check-asan check-tsan

check-asan: deps
	cmake -S . -B $(BUILD)-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSOFTVERBS_WERROR=ON \
	      -DSOFTVERBS_SANITIZE=address -DSOFTVERBS_TESTS_ONLY=ON $(CMAKE_ARGS)
	cmake --build $(BUILD)-asan -j $(JOBS)
	ctest --test-dir $(BUILD)-asan --output-on-failure --timeout 600 -L sanitize $(CTEST_ARGS)

check-tsan: deps
	cmake -S . -B $(BUILD)-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSOFTVERBS_WERROR=ON \
	      -DSOFTVERBS_SANITIZE=thread -DSOFTVERBS_TESTS_ONLY=ON $(CMAKE_ARGS)
	cmake --build $(BUILD)-tsan -j $(JOBS)
	ctest --test-dir $(BUILD)-tsan --output-on-failure --timeout 600 -L sanitize $(CTEST_ARGS)

# The wire parser under libFuzzer (clang), for a bounded time; findings fail.
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
