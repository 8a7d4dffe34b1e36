# libFuzzer targets (option PSHARD_FUZZ, clang only): tests/fuzz/fuzz_<name>.cc -> bin/fuzz_<name>.
#
#   CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPSHARD_FUZZ=ON -DPSHARD_CUDA=OFF
#   cmake --build build-fuzz --target pshard_fuzz      # all targets; scripts/fuzz.sh runs them
#
# With the option on, every pshard source of this build is compiled with
# -fsanitize=fuzzer-no-link,address,undefined (coverage for the fuzzer, ASan and
# UBSan in the code under test) and each fuzz target is linked with
# -fsanitize=fuzzer,address,undefined. With the option off this file does nothing.
option(PSHARD_FUZZ "Build the libFuzzer targets of tests/fuzz (clang only)" OFF)

if(PSHARD_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "PSHARD_FUZZ=ON needs clang (libFuzzer), but the C++ compiler is ${CMAKE_CXX_COMPILER_ID} "
                        "${CMAKE_CXX_COMPILER}. Configure a separate build directory with "
                        "CC=clang CXX=clang++ (Debian: apt-get install clang libclang-rt-14-dev).")
  endif()
  set(PSHARD_FUZZ_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  # Everything compiled in this build directory (our libraries and the generated Cap'n Proto code)
  # gets coverage instrumentation and the sanitizers.
  add_compile_options(-fsanitize=fuzzer-no-link ${PSHARD_FUZZ_FLAGS})
  add_link_options(${PSHARD_FUZZ_FLAGS})

  # The data-file parsers are built on their own: pshard_worker would pull in the models.
  file(GLOB PSHARD_FUZZ_DATA_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/worker/data/*.cc)
  pshard_library(pshard_fuzz_data SOURCES ${PSHARD_FUZZ_DATA_SOURCES} DEPS pshard_common JPEG::JPEG PNG::PNG)

  file(GLOB PSHARD_FUZZ_TARGETS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_*.cc)
  add_custom_target(pshard_fuzz)
  foreach(source ${PSHARD_FUZZ_TARGETS})
    get_filename_component(name ${source} NAME_WE)
    add_executable(${name} ${source})
    pshard_target_defaults(${name})
    # pshard_server: fuzz_kv_message runs row requests through the servers' table store.
    target_link_libraries(${name} PRIVATE pshard_fuzz_data pshard_server pshard_optimizers pshard_common)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    add_dependencies(pshard_fuzz ${name})
  endforeach()
  # Writes the seed corpora (tests/fuzz/corpus/<target>/); no libFuzzer main.
  add_executable(pshard_fuzz_seeds ${CMAKE_SOURCE_DIR}/tests/fuzz/seed_corpus.cc)
  pshard_target_defaults(pshard_fuzz_seeds)
  target_link_libraries(pshard_fuzz_seeds PRIVATE pshard_fuzz_data pshard_common)
  add_dependencies(pshard_fuzz pshard_fuzz_seeds)
  message(STATUS "pshard fuzzing: ON (targets: pshard_fuzz)")
endif()
