# Runs photon-server (-DSERVER=path) in one of these modes (-DMODE=...); none of them serves:
#   help:        --help lists every option, the weight options among them
#   bad_options: out-of-range or unknown values (--weights int4, --int8-group 0, --port 70000,
#                --kv-memory-fraction 1.5)
#                exit non-zero with the option named on stderr, before any model is loaded
#   bad_model:   a folder that is not a model, with --weights int8, exits 1 with
#                "photon-server: error:" and the reason (never a crash); so do two KV cache
#                sizes at once (--kv-blocks and --kv-memory-fraction)
cmake_minimum_required(VERSION 3.20)

if(MODE STREQUAL "help")
  execute_process(COMMAND ${SERVER} --help RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "--help exited ${rc}: ${err}")
  endif()
  foreach(opt --model --host --port --backend --device --kv-blocks --kv-memory-fraction --max-seqs --max-batch-tokens --threads
              --weights --int8-group --no-prefix-caching --served-model-name --api-key --http-threads
              --max-pending --max-body-mb --log-requests)
    string(FIND "${out}" "${opt}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "--help does not list ${opt}:\n${out}")
    endif()
  endforeach()
  foreach(value auto int8 int8-lm-head)
    string(FIND "${out}" "${value}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "--help does not name the --weights value ${value}:\n${out}")
    endif()
  endforeach()
elseif(MODE STREQUAL "bad_options")
  foreach(case "--weights;int4;--weights" "--int8-group;0;--int8-group" "--int8-group;-3;--int8-group"
               "--port;70000;--port" "--backend;tpu;--backend" "--kv-memory-fraction;1.5;--kv-memory-fraction")
    list(GET case 0 opt)
    list(GET case 1 value)
    list(GET case 2 named)
    execute_process(COMMAND ${SERVER} --model ${STORIES} ${opt} ${value}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
    if(rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$")
      message(FATAL_ERROR "${opt} ${value}: expected a non-zero exit, got '${rc}'\n${out}\n${err}")
    endif()
    string(FIND "${out}${err}" "${named}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "${opt} ${value}: the message does not name ${named}:\n${out}\n${err}")
    endif()
    string(FIND "${out}${err}" "listening" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${opt} ${value}: the server started:\n${out}\n${err}")
    endif()
  endforeach()
elseif(MODE STREQUAL "bad_model")
  # Runs the server with ARGN: it must exit 1 with "photon-server: error:" and `needle` on stderr.
  function(expect_startup_error what needle)
    execute_process(COMMAND ${SERVER} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
    if(NOT rc EQUAL 1)
      message(FATAL_ERROR "${what}: expected exit 1, got '${rc}'\n${out}\n${err}")
    endif()
    foreach(want "photon-server: error:" "${needle}")
      string(FIND "${err}" "${want}" at)
      if(at EQUAL -1)
        message(FATAL_ERROR "${what}: no '${want}' on stderr:\n${err}")
      endif()
    endforeach()
  endfunction()
  file(REMOVE_RECURSE ${SCRATCH})
  file(MAKE_DIRECTORY ${SCRATCH})
  file(WRITE ${SCRATCH}/config.json "{\"model_type\": \"llama\", \"hidden_size\": ")
  expect_startup_error("a malformed config.json" "config.json"
                       --model ${SCRATCH} --backend cpu --weights int8 --port 0)
  # Two KV cache sizes at once: the engine refuses the options, after parsing.
  expect_startup_error("--kv-blocks with --kv-memory-fraction" "at most one of kv_blocks"
                       --model ${STORIES} --backend cpu --kv-blocks 64 --kv-memory-fraction 0.5 --port 0)
else()
  message(FATAL_ERROR "unknown MODE ${MODE}")
endif()
