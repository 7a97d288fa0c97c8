# tend_add_test(NAME SOURCES src... [LIBS lib...] [LABELS unit|integration|systemd]
#               [TIMEOUT seconds] [ARGS arg...] [WRAP cmd...])
#
# One helper for every test (as libssh's add_cmocka_test): builds the
# executable, registers it with ctest, sets a timeout and labels. Exit code 77
# means "skipped, the machine lacks something" and is reported as such.
function(tend_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS;ARGS;WRAP" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} PkgConfig::CMOCKA tend_warnings)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  # WRAP: a command the test runs under (tests/systemd/harness.sh)
  add_test(NAME ${name} COMMAND ${T_WRAP} $<TARGET_FILE:${name}> ${T_ARGS})
  set_tests_properties(${name} PROPERTIES
    TIMEOUT ${T_TIMEOUT}
    LABELS "${T_LABELS}"
    SKIP_RETURN_CODE 77
    ENVIRONMENT "TEND_SOURCE_DIR=${PROJECT_SOURCE_DIR};TEND_BIN_DIR=${CMAKE_BINARY_DIR}/bin;ASAN_OPTIONS=detect_leaks=1:abort_on_error=1;UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
endfunction()

# tend_add_script_test(NAME COMMAND cmd... [LABELS ...] [TIMEOUT s])
# A test that is a script or a command line rather than a C program.
function(tend_add_script_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "COMMAND;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  add_test(NAME ${name} COMMAND ${T_COMMAND})
  set_tests_properties(${name} PROPERTIES
    TIMEOUT ${T_TIMEOUT}
    LABELS "${T_LABELS}"
    SKIP_RETURN_CODE 77
    ENVIRONMENT "TEND_SOURCE_DIR=${PROJECT_SOURCE_DIR};TEND_BIN_DIR=${CMAKE_BINARY_DIR}/bin;ASAN_OPTIONS=detect_leaks=1:abort_on_error=1")
endfunction()

# tend_fuzz_internals(NAME DIR): fuzz target NAME (and its replay) may
# include the private headers of DIR.
function(tend_fuzz_internals name dir)
  target_include_directories(${name}-replay PRIVATE ${dir})
  if(TARGET ${name})
    target_include_directories(${name} PRIVATE ${dir})
  endif()
endfunction()

# tend_add_fuzz(NAME [SOURCES src...] [LIBS lib...])
#
# A fuzz target (tests/fuzz/README.md): NAME.c in tests/fuzz defines
# LLVMFuzzerTestOneInput(). Always built: NAME-replay, a test (label unit)
# that runs the target on every input of tests/fuzz/corpus/NAME/ and
# tests/fuzz/crashes/NAME/ with the build's own compiler and sanitizers.
# With TEND_FUZZ (clang): NAME itself, a libFuzzer executable in
# ${CMAKE_BINARY_DIR}/fuzz/, which `make fuzz` (scripts/fuzz.sh) runs.
function(tend_add_fuzz name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  set(dir ${PROJECT_SOURCE_DIR}/tests/fuzz)
  if(NOT T_SOURCES)
    set(T_SOURCES ${dir}/${name}.c)
  endif()
  tend_add_test(${name}-replay SOURCES ${T_SOURCES} ${dir}/fuzz.c ${dir}/replay.c
                LIBS ${T_LIBS} LABELS unit ARGS ${dir}/corpus/${name} ${dir}/crashes/${name})
  if(TEND_FUZZ)
    add_executable(${name} ${T_SOURCES} ${dir}/fuzz.c)
    target_link_libraries(${name} PRIVATE ${T_LIBS} tend_warnings)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    # what only a libFuzzer build has (LLVMFuzzerMutate for a custom mutator)
    target_compile_definitions(${name} PRIVATE TEND_LIBFUZZER)
    set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
    add_dependencies(fuzz-targets ${name})
  endif()
endfunction()
