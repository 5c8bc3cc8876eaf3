# C API tests written in C: each tests/capi/test_*.c is one executable,
# compiled as C99 with -pedantic -Werror (so photon.h is checked as strict C
# on every build) and linked against the shared libphoton, as a C host links
# it. Each runs as one ctest test labelled capi.
find_package(Threads REQUIRED)
file(GLOB _capi_c_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test_*.c)
foreach(src ${_capi_c_tests})
  get_filename_component(name ${src} NAME_WE)
  set(tgt photon_capi_${name})
  add_executable(${tgt} ${src})
  set_target_properties(${tgt} PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF)
  target_compile_options(${tgt} PRIVATE -pedantic -Wall -Wextra -Wstrict-prototypes -Werror)
  target_link_libraries(${tgt} PRIVATE photon Threads::Threads)
  target_compile_definitions(${tgt} PRIVATE
    PHOTON_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data"
    PHOTON_TEST_DATA_BUILD_DIR="${PHOTON_TEST_DATA_BUILD}"
    PHOTON_MODELS_DIR="${PROJECT_SOURCE_DIR}/models")
  add_test(NAME "capi: ${name}.c" COMMAND ${tgt})
  set_tests_properties("capi: ${name}.c" PROPERTIES LABELS capi)
endforeach()

# The C++ unit tests of the shims' internals (tests/capi/*.cpp) include capi/*.hpp.
if(TARGET photon_tests_capi)
  target_include_directories(photon_tests_capi PRIVATE ${PROJECT_SOURCE_DIR})
endif()

# 200 engine/tokenizer open-destroy cycles under valgrind: any definite or
# indirect leak, or any memory error, fails the test. Skipped in sanitizer
# builds (valgrind cannot run them).
find_program(PHOTON_VALGRIND valgrind)
if(PHOTON_VALGRIND AND TARGET photon_capi_test_lifecycle AND NOT PHOTON_SANITIZE_THREAD AND NOT PHOTON_SANITIZE_ADDRESS)
  add_test(NAME "capi: test_lifecycle.c (valgrind)"
           COMMAND ${PHOTON_VALGRIND} --quiet --error-exitcode=99 --leak-check=full
                   --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect
                   $<TARGET_FILE:photon_capi_test_lifecycle>)
  set_tests_properties("capi: test_lifecycle.c (valgrind)" PROPERTIES LABELS capi TIMEOUT 900)
endif()
