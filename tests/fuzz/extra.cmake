# Fuzz targets of photon's parsers (docs/testing.md). Each tests/fuzz/fuzz_<name>.cpp
# defines LLVMFuzzerTestOneInput; its seeds are tests/fuzz/corpus/<name>/.
#  - Always: photon_fuzz_<name>, the target linked with replay_main.cpp, run by ctest
#    (labels core, fuzz) over the seeds plus deterministic random mutations of them,
#    bounded in count and time.
#  - PHOTON_FUZZ=ON (clang): photon_libfuzzer_<name>, a libFuzzer binary; the whole
#    build is then instrumented (-fsanitize=fuzzer-no-link,address,undefined).
set(_fuzz_dir ${CMAKE_CURRENT_LIST_DIR})
set(PHOTON_FUZZ_MUTATIONS 20000 CACHE STRING "Mutated inputs each fuzz replay test runs at most")
set(PHOTON_FUZZ_SECONDS 15 CACHE STRING "Seconds each fuzz replay test mutates for at most")
file(GLOB _fuzz_srcs CONFIGURE_DEPENDS ${_fuzz_dir}/fuzz_*.cpp)
foreach(src ${_fuzz_srcs})
  get_filename_component(_stem ${src} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" name ${_stem})
  # Targets of example programs' parsers: their sources, or the server's library
  # (which links the shared libphoton, as the server does).
  set(_extra_srcs "")
  set(_extra_incs "")
  set(_libs photon_internal)
  if(name STREQUAL "batch_request")
    if(NOT PHOTON_BUILD_EXAMPLES)
      continue()
    endif()
    set(_extra_srcs ${PROJECT_SOURCE_DIR}/examples/cli/batch_request.cpp)
    set(_extra_incs ${PROJECT_SOURCE_DIR}/examples/cli)
  elseif(name STREQUAL "server_request")
    if(NOT TARGET photon_server_lib)
      continue()
    endif()
    set(_libs photon_server_lib)
  endif()
  set(_variants replay)
  if(PHOTON_FUZZ)
    list(APPEND _variants libfuzzer)
  endif()
  foreach(variant ${_variants})
    if(variant STREQUAL "replay")
      set(tgt photon_fuzz_${name})
      add_executable(${tgt} ${src} ${_extra_srcs} ${_fuzz_dir}/replay_main.cpp)
    else()
      set(tgt photon_libfuzzer_${name})
      add_executable(${tgt} ${src} ${_extra_srcs})
      target_link_options(${tgt} PRIVATE -fsanitize=fuzzer)
    endif()
    target_include_directories(${tgt} PRIVATE ${_fuzz_dir} ${_extra_incs})
    target_link_libraries(${tgt} PRIVATE ${_libs})
    target_compile_options(${tgt} PRIVATE ${PHOTON_WARNINGS})
    target_compile_definitions(${tgt} PRIVATE
      PHOTON_FUZZ_BASE_TOKENIZER="${_fuzz_dir}/corpus/tokenizer_json/llama3_small.json"
      PHOTON_FUZZ_BASE_TOKENIZER_CONFIG="${_fuzz_dir}/corpus/tokenizer_settings/llama3_config.bin")
  endforeach()
  add_test(NAME "fuzz: ${name} (seeds + mutations)"
    COMMAND photon_fuzz_${name} --mutations ${PHOTON_FUZZ_MUTATIONS} --seconds ${PHOTON_FUZZ_SECONDS}
            ${_fuzz_dir}/corpus/${name}
    WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties("fuzz: ${name} (seeds + mutations)" PROPERTIES LABELS "core;fuzz" TIMEOUT 300)
endforeach()
