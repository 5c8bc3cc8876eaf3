# The photon-server binary's command line, run by ctest through a CMake script
# (server_cli_test.cmake), labelled `api`. The HTTP behaviour itself is tested
# in-process by examples/server/tests.
if(TARGET photon_server)
  foreach(mode help bad_options bad_model)
    set(_name "server cli: ${mode}")
    add_test(NAME "${_name}"
      COMMAND ${CMAKE_COMMAND} -DMODE=${mode} -DSERVER=$<TARGET_FILE:photon_server>
              -DSTORIES=${PROJECT_SOURCE_DIR}/models/stories260K
              -DSCRATCH=${CMAKE_CURRENT_BINARY_DIR}/server-cli-scratch-${mode}
              -P ${CMAKE_CURRENT_LIST_DIR}/server_cli_test.cmake)
    set_tests_properties("${_name}" PROPERTIES LABELS api)
  endforeach()
endif()
