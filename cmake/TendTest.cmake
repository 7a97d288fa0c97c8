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
