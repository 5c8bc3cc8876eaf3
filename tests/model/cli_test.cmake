# Runs the `photon` CLI (-DPHOTON=path) in one of these modes (-DMODE=...):
#   golden: `generate --json` on MODEL reproduces generated_ids of every GOLDEN_DIR/*.json
#           that has them (prompt_ids given), with finish_reason "length"
#   prompt: `generate --prompt` with GOLDEN_DIR/once_upon_a_time.json's prompt text gives its
#           generated_ids and generated_text
#   logits: `logits` on MODEL prints one row of vocab_size floats per input token
#   int8:   `generate --int8`, `batch --int8` and `bench --int8` run on MODEL (cpu backend); bench --kv-sequences
#   errors: bad folders, malformed files and bad token lists exit with status 1
#           and an "error:" message on stderr (never a crash)
cmake_minimum_required(VERSION 3.20)

function(json_int_list json key out)
  string(JSON n LENGTH "${json}" ${key})
  set(items "")
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    string(JSON v GET "${json}" ${key} ${i})
    list(APPEND items ${v})
  endforeach()
  set(${out} "${items}" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "golden")
  file(GLOB goldens ${GOLDEN_DIR}/*.json)
  set(checked 0)
  foreach(g ${goldens})
    file(READ ${g} text)
    string(JSON has_ids ERROR_VARIABLE no_ids GET "${text}" generated_ids)
    if(no_ids)
      continue()
    endif()
    json_int_list("${text}" prompt_ids prompt)
    json_int_list("${text}" generated_ids expected)
    list(LENGTH expected n)
    list(JOIN prompt "," prompt_csv)
    execute_process(COMMAND ${PHOTON} generate --model ${MODEL} --tokens ${prompt_csv} --max-tokens ${n} --json
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${g}: photon generate failed (${rc}): ${err}")
    endif()
    json_int_list("${out}" tokens got)
    string(JSON reason GET "${out}" finish_reason)
    if(NOT got STREQUAL expected OR NOT reason STREQUAL "length")
      message(FATAL_ERROR "${g}: expected ${expected} (length), got ${got} (${reason})")
    endif()
    math(EXPR checked "${checked} + 1")
  endforeach()
  if(checked EQUAL 0)
    message(FATAL_ERROR "no golden generations found in ${GOLDEN_DIR}")
  endif()
  message(STATUS "${checked} golden generations reproduced by ${MODEL}")

elseif(MODE STREQUAL "prompt")
  file(READ ${GOLDEN_DIR}/once_upon_a_time.json text)
  string(JSON prompt GET "${text}" prompt)
  string(JSON expected_text GET "${text}" generated_text)
  json_int_list("${text}" generated_ids expected)
  list(LENGTH expected n)
  execute_process(COMMAND ${PHOTON} generate --model ${MODEL} --prompt "${prompt}" --max-tokens ${n} --json
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "photon generate --prompt failed (${rc}): ${err}")
  endif()
  json_int_list("${out}" tokens got)
  string(JSON got_text GET "${out}" text)
  if(NOT got STREQUAL expected OR NOT got_text STREQUAL expected_text)
    message(FATAL_ERROR "expected ${expected} '${expected_text}', got ${got} '${got_text}'")
  endif()

elseif(MODE STREQUAL "logits")
  file(READ ${MODEL}/config.json config)
  string(JSON vocab GET "${config}" vocab_size)
  execute_process(COMMAND ${PHOTON} logits --model ${MODEL} --tokens 5,17,3
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "photon logits failed (${rc}): ${err}")
  endif()
  string(JSON rows LENGTH "${out}" logits)
  string(JSON cols LENGTH "${out}" logits 2)
  if(NOT rows EQUAL 3 OR NOT cols EQUAL vocab)
    message(FATAL_ERROR "expected 3 rows of ${vocab} logits, got ${rows} rows of ${cols}")
  endif()

elseif(MODE STREQUAL "int8")
  # --int8 on generate and batch: runs on the cpu backend and gives the requested
  # number of tokens (their agreement with fp32 is tests/model/test_int8_weights.cpp's);
  # a bad group size exits 1.
  file(READ ${GOLDEN_DIR}/once_upon_a_time.json text)
  json_int_list("${text}" prompt_ids prompt)
  list(JOIN prompt "," prompt_csv)
  execute_process(COMMAND ${PHOTON} generate --model ${MODEL} --backend cpu --tokens ${prompt_csv} --max-tokens 12
                          --ignore-eos --json --int8 --int8-group 32
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "photon generate --int8 failed (${rc}): ${err}")
  endif()
  string(JSON n LENGTH "${out}" tokens)
  string(JSON reason GET "${out}" finish_reason)
  if(NOT n EQUAL 12 OR NOT reason STREQUAL "length")
    message(FATAL_ERROR "generate --int8: expected 12 tokens (length), got ${out}")
  endif()
  file(MAKE_DIRECTORY ${SCRATCH})
  file(WRITE ${SCRATCH}/int8.jsonl "{\"id\": \"a\", \"tokens\": [${prompt_csv}], \"max_tokens\": 5, \"ignore_eos\": true}\n")
  execute_process(COMMAND ${PHOTON} batch --model ${MODEL} --backend cpu --requests ${SCRATCH}/int8.jsonl --int8
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "photon batch --int8 failed (${rc}): ${err}")
  endif()
  string(JSON n LENGTH "${out}" tokens)
  if(NOT n EQUAL 5)
    message(FATAL_ERROR "batch --int8: expected 5 tokens, got ${out}")
  endif()
  execute_process(COMMAND ${PHOTON} generate --model ${MODEL} --tokens 1 --int8 --int8-group 0
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "generate --int8 --int8-group 0 was accepted")
  endif()
  # bench --int8 says so and counts 1 + 4/32 bytes per linear weight (bf16: 2) in a decode step's reads
  set(bench_args bench --backend cpu --model ${MODEL} --json --batches 2 --shapes 8x4 --ttft-prompts 8
                 --prefill-prompt 8 --decode-prompt 8 --decode-tokens 4 --repeats 1)
  execute_process(COMMAND ${PHOTON} ${bench_args} --int8 --int8-group 32
                  RESULT_VARIABLE rc OUTPUT_VARIABLE q8 ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "photon bench --int8 failed (${rc}): ${err}")
  endif()
  execute_process(COMMAND ${PHOTON} ${bench_args} RESULT_VARIABLE rc OUTPUT_VARIABLE ref ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "photon bench failed (${rc}): ${err}")
  endif()
  string(JSON weights GET "${q8}" weights)
  string(JSON q8_bytes GET "${q8}" single_stream bytes_per_step)
  string(JSON ref_bytes GET "${ref}" single_stream bytes_per_step)
  if(NOT weights STREQUAL "int8, group 32" OR NOT q8_bytes LESS ref_bytes)
    message(FATAL_ERROR "bench --int8: weights '${weights}', bytes per step ${q8_bytes} (bf16: ${ref_bytes})")
  endif()
  execute_process(COMMAND ${PHOTON} ${bench_args} --int8 --int8-group 0
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "group size 0")
    message(FATAL_ERROR "bench --int8 --int8-group 0: rc ${rc}, stderr ${err}")
  endif()
  # bench --kv-sequences sizes the KV pool apart from the largest batch (default: that batch), never below it
  string(JSON pool GET "${ref}" kv_pool_sequences)
  if(NOT pool EQUAL 2)
    message(FATAL_ERROR "bench: kv_pool_sequences ${pool}, expected the largest batch 2")
  endif()
  execute_process(COMMAND ${PHOTON} ${bench_args} --kv-sequences 5 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "photon bench --kv-sequences 5 failed (${rc}): ${err}")
  endif()
  string(JSON pool GET "${out}" kv_pool_sequences)
  if(NOT pool EQUAL 5)
    message(FATAL_ERROR "bench --kv-sequences 5: kv_pool_sequences ${pool}")
  endif()
  foreach(bad 1 -3)
    execute_process(COMMAND ${PHOTON} ${bench_args} --kv-sequences ${bad} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(rc EQUAL 0 OR NOT err MATCHES "kv-sequences")
      message(FATAL_ERROR "bench --kv-sequences ${bad}: rc ${rc}, stderr ${err}")
    endif()
  endforeach()

elseif(MODE STREQUAL "errors")
  file(REMOVE_RECURSE ${SCRATCH})
  file(MAKE_DIRECTORY ${SCRATCH}/malformed ${SCRATCH}/no-weights)
  file(COPY ${MODEL}/config.json DESTINATION ${SCRATCH}/malformed)
  file(COPY ${MODEL}/config.json DESTINATION ${SCRATCH}/no-weights)
  file(WRITE ${SCRATCH}/malformed/model.safetensors "not a safetensors file at all")
  set(cases
    "missing folder|generate|--model|${SCRATCH}/absent|--tokens|1"
    "folder without weights|generate|--model|${SCRATCH}/no-weights|--tokens|1"
    "malformed weights|logits|--model|${SCRATCH}/malformed|--tokens|1"
    "token id out of range|generate|--model|${MODEL}|--tokens|1,512"
    "negative token id|logits|--model|${MODEL}|--tokens|-4"
    "not a token id|generate|--model|${MODEL}|--tokens|1,two"
    "prompt past max_position_embeddings|generate|--model|${MODEL}|--tokens|1|--max-tokens|600"
    "both --tokens and --prompt|generate|--model|${MODEL}|--tokens|1|--prompt|Once")
  foreach(c ${cases})
    string(REPLACE "|" ";" args "${c}")
    list(POP_FRONT args what)
    execute_process(COMMAND ${PHOTON} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc STREQUAL "1" OR NOT err MATCHES "error: ")
      message(FATAL_ERROR "${what}: expected exit status 1 and an error message, got '${rc}': ${err}")
    endif()
    message(STATUS "${what}: ${err}")
  endforeach()
else()
  message(FATAL_ERROR "unknown MODE '${MODE}'")
endif()
