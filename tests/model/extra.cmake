# CLI tests of the model subcommands: the `photon` binary run by ctest through
# CMake scripts (no other interpreter needed), labelled `model`.
if(TARGET photon_cli)
  set(_cli_script ${CMAKE_CURRENT_LIST_DIR}/cli_test.cmake)
  foreach(model_dir ${PROJECT_SOURCE_DIR}/models/stories260K ${PROJECT_SOURCE_DIR}/tests/data/stories260K-untied)
    get_filename_component(_name ${model_dir} NAME)
    add_test(NAME "cli: generate reproduces the ${_name} goldens"
      COMMAND ${CMAKE_COMMAND} -DMODE=golden -DPHOTON=$<TARGET_FILE:photon_cli> -DMODEL=${model_dir}
              -DGOLDEN_DIR=${PROJECT_SOURCE_DIR}/models/stories260K/golden -P ${_cli_script})
    set_tests_properties("cli: generate reproduces the ${_name} goldens" PROPERTIES LABELS model)
  endforeach()
  add_test(NAME "cli: generate --prompt encodes text and decodes the continuation"
    COMMAND ${CMAKE_COMMAND} -DMODE=prompt -DPHOTON=$<TARGET_FILE:photon_cli> -DMODEL=${PROJECT_SOURCE_DIR}/models/stories260K
            -DGOLDEN_DIR=${PROJECT_SOURCE_DIR}/models/stories260K/golden -P ${_cli_script})
  add_test(NAME "cli: generate, batch and bench --int8 quantize the linear layers; bench --kv-sequences sizes the pool"
    COMMAND ${CMAKE_COMMAND} -DMODE=int8 -DPHOTON=$<TARGET_FILE:photon_cli> -DMODEL=${PROJECT_SOURCE_DIR}/models/stories260K
            -DGOLDEN_DIR=${PROJECT_SOURCE_DIR}/models/stories260K/golden
            -DSCRATCH=${CMAKE_CURRENT_BINARY_DIR}/cli-test-int8 -P ${_cli_script})
  add_test(NAME "cli: logits prints one row per position"
    COMMAND ${CMAKE_COMMAND} -DMODE=logits -DPHOTON=$<TARGET_FILE:photon_cli>
            -DMODEL=${PROJECT_SOURCE_DIR}/tests/data/golden/qwen3-tiny -P ${_cli_script})
  add_test(NAME "cli: bad inputs exit 1 with a message"
    COMMAND ${CMAKE_COMMAND} -DMODE=errors -DPHOTON=$<TARGET_FILE:photon_cli>
            -DMODEL=${PROJECT_SOURCE_DIR}/models/stories260K -DSCRATCH=${CMAKE_CURRENT_BINARY_DIR}/cli-test-scratch
            -P ${_cli_script})
  set_tests_properties("cli: generate --prompt encodes text and decodes the continuation"
    "cli: generate, batch and bench --int8 quantize the linear layers; bench --kv-sequences sizes the pool"
    "cli: logits prints one row per position" "cli: bad inputs exit 1 with a message"
    PROPERTIES LABELS model)
endif()
