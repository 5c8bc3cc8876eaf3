# CLI tests of the text subcommands (tokenize, detokenize, render, chat): the
# `photon` binary run by ctest through a CMake script, labelled `model`.
if(TARGET photon_cli)
  foreach(mode tokenize detokenize render chat errors)
    set(_name "cli: ${mode} (text subcommands)")
    add_test(NAME "${_name}"
      COMMAND ${CMAKE_COMMAND} -DMODE=${mode} -DPHOTON=$<TARGET_FILE:photon_cli>
              -DTOKDIR=${PHOTON_TEST_DATA_BUILD}/tokenizers -DSTORIES=${PROJECT_SOURCE_DIR}/models/stories260K
              -DSCRATCH=${CMAKE_CURRENT_BINARY_DIR}/cli-text-scratch-${mode}
              -P ${CMAKE_CURRENT_LIST_DIR}/text_cli_test.cmake)
    set_tests_properties("${_name}" PROPERTIES LABELS model)
  endforeach()
endif()
