# A thin front door over CMake (as neovim does). Everything real is in
# CMakeLists.txt; these targets only pick the build tree and the build type.
#
#   make deps    install missing build/test dependencies (apt-get)
#   make build   release build; binaries in build/bin/
#   make run     build, then start the agent with the examples
#   make test    debug build with ASan/UBSan and -Werror, then ctest
#   make bench   release build, then run the benchmarks under bench/
#   make format  reformat the sources with clang-format

BUILD_DIR   ?= build
TEST_DIR    ?= build/debug
CMAKE       ?= cmake
CTEST       ?= ctest
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps build run test bench format clean

all: build

deps:
	@scripts/deps.sh

$(BUILD_DIR)/CMakeCache.txt: | deps
	$(CMAKE) -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD_DIR)/CMakeCache.txt
	$(CMAKE) --build $(BUILD_DIR) -j $(JOBS)

run: build
	@scripts/run.sh $(BUILD_DIR)

test: deps
	$(CMAKE) -S . -B $(TEST_DIR) -DCMAKE_BUILD_TYPE=Debug \
		-DTEND_SANITIZE=ON -DTEND_WERROR=ON $(CMAKE_FLAGS)
	$(CMAKE) --build $(TEST_DIR) -j $(JOBS)
	cd $(TEST_DIR) && $(CTEST) --output-on-failure -j $(JOBS)

bench: build
	@scripts/deps.sh --bench
	@scripts/bench.sh $(BUILD_DIR)

format:
	git ls-files '*.c' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR) $(TEST_DIR)
