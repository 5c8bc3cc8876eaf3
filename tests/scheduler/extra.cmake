# CLI tests of `photon batch` and of `photon generate`'s sampling flags: the
# `photon` binary run by ctest through a CMake script, labelled `scheduler`.
if(TARGET photon_cli)
  foreach(mode golden text sampling errors)
    set(_name "cli: batch and generate on the engine (${mode})")
    add_test(NAME "${_name}"
      COMMAND ${CMAKE_COMMAND} -DMODE=${mode} -DPHOTON=$<TARGET_FILE:photon_cli>
              -DGOLDEN=${PROJECT_SOURCE_DIR}/tests/data/golden -DSTORIES=${PROJECT_SOURCE_DIR}/models/stories260K
              -DSCRATCH=${CMAKE_CURRENT_BINARY_DIR}/cli-batch-scratch-${mode}
              -P ${CMAKE_CURRENT_LIST_DIR}/batch_cli_test.cmake)
    set_tests_properties("${_name}" PROPERTIES LABELS scheduler)
  endforeach()
endif()
