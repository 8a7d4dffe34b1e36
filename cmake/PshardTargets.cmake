# Helpers that give every pshard target the same flags.

# Warnings are errors in our own code (not in generated or third-party code).
set(PSHARD_WARNINGS -Wall -Wextra -Werror)

# PSHARD_SANITIZE (CMakeLists.txt) picks the sanitizer flags; they go on every
# pshard target and on the generated Cap'n Proto code (common/CMakeLists.txt).
# TSan and ASan cannot be combined, hence one setting with a value.
string(TOLOWER "${PSHARD_SANITIZE}" PSHARD_SANITIZE_LC)
if(PSHARD_SANITIZE_LC STREQUAL "thread")
  # GCC's -Wtsan: TSan does not model atomic_thread_fence, which Boost.Asio's
  # handler fences use; asio also queues handlers under a mutex, which TSan sees.
  set(PSHARD_SANITIZER_FLAGS -fsanitize=thread -fno-omit-frame-pointer $<$<CXX_COMPILER_ID:GNU>:-Wno-tsan>)
elseif(PSHARD_SANITIZE_LC MATCHES "^(on|address|1|yes|true)$")
  set(PSHARD_SANITIZER_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
elseif(PSHARD_SANITIZE_LC MATCHES "^(off|0|no|false|)$")
  set(PSHARD_SANITIZER_FLAGS "")
else()
  message(FATAL_ERROR "PSHARD_SANITIZE=${PSHARD_SANITIZE}: use OFF, ON (= address) or thread")
endif()

function(pshard_target_defaults target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${PSHARD_WARNINGS}>)
  target_include_directories(${target} PUBLIC ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
  if(PSHARD_SANITIZER_FLAGS)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${PSHARD_SANITIZER_FLAGS}>)
    target_link_options(${target} PUBLIC ${PSHARD_SANITIZER_FLAGS})
  endif()
endfunction()

# pshard_library(NAME SOURCES ... DEPS ...): one static library per folder.
# Each folder's CMakeLists.txt globs its own sources (CONFIGURE_DEPENDS), so a
# new file is picked up without editing a list.
function(pshard_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "pshard_library(${name}): no sources")
  endif()
  add_library(${name} STATIC ${ARG_SOURCES})
  pshard_target_defaults(${name})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# pshard_test(NAME LABEL label SOURCES ... DEPS ... [TIMEOUT s]): a GoogleTest
# executable registered with ctest under the given label.
function(pshard_test name)
  cmake_parse_arguments(ARG "" "LABEL;TIMEOUT" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  pshard_target_defaults(${name})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  # OMP_WAIT_POLICY=PASSIVE: tests share the cores with each other (ctest -j) and with the processes they start; an
  # OpenMP thread spinning at a barrier for a descheduled partner made a 2-thread gradient check take 130 s instead
  # of 2 s at load 4. Tests check results, not speed (benchmarks run with OpenMP's default policy).
  set_tests_properties(${name} PROPERTIES LABELS ${ARG_LABEL} TIMEOUT ${ARG_TIMEOUT}
                       ENVIRONMENT "PSHARD_BIN=${CMAKE_BINARY_DIR}/bin/pshard;PSHARD_SOURCE_DIR=${CMAKE_SOURCE_DIR};OMP_WAIT_POLICY=PASSIVE")
endfunction()
