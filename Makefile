# A thin front door over CMake (as neovim does). Everything real is in
# CMakeLists.txt; these targets only pick the build tree and the build type.
#
#   make deps    install missing build/test dependencies (apt-get)
#   make build   release build; binaries in build/bin/
#   make run     build, then start the agent with the examples
#   make test    debug build with ASan/UBSan and -Werror, then ctest
#   make bench   release build, then run the benchmarks under bench/
#   make fleet   release build, then a fleet on this machine to try by hand:
#                a 3-member etcd and three tendd (n1, n2, n3); Ctrl-C stops it
#   make fleet-rmw  release build, then the fleet's read-modify-write test
#                long: clients through three nodes, every acknowledged write
#                in etcd (ROUNDS=N per client, default 1000)
#   make chaos   release build, then a long seeded chaos run of the real tendd
#                (SEED=N STEPS=N; CHAOS_BOUND=warn reports the live bound only)
#   make fuzz    clang build of tests/fuzz/, then each libFuzzer target for
#                FUZZ_TIME seconds (default 60; `make fuzz FUZZ_TIME=3600` for
#                an hour each, FUZZ_TARGETS=fuzz-spec for one target)
#   make format  reformat the sources with clang-format

BUILD_DIR   ?= build
TEST_DIR    ?= build/debug
CMAKE       ?= cmake
CTEST       ?= ctest
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
FUZZ_DIR    ?= build/fuzz
FUZZ_TIME   ?= 60
FUZZ_TARGETS ?=

# make chaos: a random seed unless SEED is given (the run prints it).
SEED        ?=
STEPS       ?= 3000
CHAOS_BOUND ?= fail
# make fleet-rmw: increments per client
ROUNDS      ?= 1000

.PHONY: all deps build run test bench chaos fleet fleet-rmw fuzz format clean

all: build

deps:
	@scripts/deps.sh

$(BUILD_DIR)/CMakeCache.txt: | deps
	$(CMAKE) -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD_DIR)/CMakeCache.txt
	$(CMAKE) --build $(BUILD_DIR) -j $(JOBS)

run: build
	@scripts/run.sh $(BUILD_DIR)

fleet: build
	@scripts/fleet.sh $(BUILD_DIR)

fleet-rmw: build
	TEND_BIN_DIR=$(abspath $(BUILD_DIR))/bin TEND_RMW_ROUNDS=$(ROUNDS) tests/fleet/rmw.sh

test: deps
	$(CMAKE) -S . -B $(TEST_DIR) -DCMAKE_BUILD_TYPE=Debug \
		-DTEND_SANITIZE=ON -DTEND_WERROR=ON $(CMAKE_FLAGS)
	$(CMAKE) --build $(TEST_DIR) -j $(JOBS)
	cd $(TEST_DIR) && $(CTEST) --output-on-failure -j $(JOBS)

bench: build
	@scripts/deps.sh --bench
	@scripts/bench.sh $(BUILD_DIR)

chaos: build
	CHAOS_BOUND=$(CHAOS_BOUND) $(BUILD_DIR)/tests/tend-chaos --bin $(BUILD_DIR)/bin \
		--steps $(STEPS) $(if $(SEED),--seed $(SEED)) --keep-going
# Its own build tree: clang, every library instrumented for libFuzzer and
# built with ASan/UBSan. The corpus in tests/fuzz/corpus/ is only read.
fuzz:
	@scripts/deps.sh --fuzz
	$(CMAKE) -S . -B $(FUZZ_DIR) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
		-DTEND_FUZZ=ON $(CMAKE_FLAGS)
	$(CMAKE) --build $(FUZZ_DIR) -j $(JOBS) --target fuzz-targets
	@scripts/fuzz.sh $(FUZZ_DIR) $(FUZZ_TIME) $(FUZZ_TARGETS)

format:
	git ls-files '*.c' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR) $(TEST_DIR)
