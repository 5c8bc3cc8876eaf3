# Runs one group of checks of `photon batch` / `photon generate` (cmake -P).
# Inputs: MODE (golden | text | sampling | errors), PHOTON (the binary),
# GOLDEN (tests/data/golden), STORIES (models/stories260K), SCRATCH (a folder
# this test may overwrite).
cmake_minimum_required(VERSION 3.20)

function(run_photon out_var)
  execute_process(COMMAND ${PHOTON} ${ARGN} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "photon ${ARGN} exited ${rc}: ${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# The JSON array `key` of `json` as a CMake list.
function(json_list json key out)
  string(JSON n LENGTH "${json}" ${key})
  set(items "")
  if(n GREATER 0)
    math(EXPR last "${n} - 1")
    foreach(i RANGE ${last})
      string(JSON v GET "${json}" ${key} ${i})
      list(APPEND items ${v})
    endforeach()
  endif()
  set(${out} "${items}" PARENT_SCOPE)
endfunction()

# stdout split into its lines.
function(output_lines text out)
  string(REGEX REPLACE "\n$" "" text "${text}")
  string(REPLACE ";" "\\;" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(${out} "${lines}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${SCRATCH})
file(MAKE_DIRECTORY ${SCRATCH})

if(MODE STREQUAL "golden")
  # Every golden case twice, served together with a KV cache that holds one
  # long request: preemption, chunked prefill and prefix hits all happen.
  file(READ ${GOLDEN}/llama3-tiny/reference.json ref)
  string(JSON ncases LENGTH "${ref}" cases)
  math(EXPR last "${ncases} - 1")
  set(jsonl "")
  foreach(copy a b)
    foreach(i RANGE ${last})
      string(JSON prompt GET "${ref}" cases ${i} prompt_ids)
      string(REGEX REPLACE "[\n ]" "" prompt "${prompt}")  # one JSON line
      string(APPEND jsonl "{\"id\": \"case${i}-${copy}\", \"tokens\": ${prompt}, \"max_tokens\": 32, \"ignore_eos\": true}\n")
    endforeach()
  endforeach()
  file(WRITE ${SCRATCH}/requests.jsonl "${jsonl}")
  run_photon(out batch --model ${GOLDEN}/llama3-tiny --requests ${SCRATCH}/requests.jsonl --backend cpu --threads 1
             --kv-blocks 50 --block-size 8 --max-batch-tokens 48 --max-seqs 6)
  output_lines("${out}" lines)
  list(LENGTH lines nlines)
  math(EXPR want_lines "2 * ${ncases}")
  if(NOT nlines EQUAL want_lines)
    message(FATAL_ERROR "expected ${want_lines} output lines, got ${nlines}:\n${out}")
  endif()
  set(k 0)
  foreach(copy a b)
    foreach(i RANGE ${last})
      list(GET lines ${k} line)
      string(JSON id GET "${line}" id)
      string(JSON reason GET "${line}" finish_reason)
      json_list("${line}" tokens got)
      string(JSON want_json GET "${ref}" cases ${i} greedy_ids)
      json_list("{\"w\": ${want_json}}" w want)
      if(NOT id STREQUAL "case${i}-${copy}" OR NOT reason STREQUAL "length" OR NOT got STREQUAL want)
        message(FATAL_ERROR "line ${k}: expected case${i}-${copy} ${want} (length), got ${line}")
      endif()
      math(EXPR k "${k} + 1")
    endforeach()
  endforeach()

elseif(MODE STREQUAL "text")
  file(READ ${STORIES}/golden/once_upon_a_time.json g)
  string(JSON want_text GET "${g}" generated_text)
  file(WRITE ${SCRATCH}/requests.jsonl
    "{\"id\": 1, \"prompt\": \"Once upon a time\", \"max_tokens\": 64, \"ignore_eos\": true}\n"
    "{\"id\": 2, \"prompt\": \"Once upon a time\", \"max_tokens\": 64, \"stop\": \"Lily.\"}\n"
    "\n"
    "{\"id\": 3, \"tokens\": [1, 403, 407, 261, 378], \"max_tokens\": 8, \"logprobs\": 2}\n")
  run_photon(out batch --model ${STORIES} --requests ${SCRATCH}/requests.jsonl --backend cpu --threads 1)
  output_lines("${out}" lines)
  list(GET lines 0 l0)
  list(GET lines 1 l1)
  list(GET lines 2 l2)
  string(JSON t0 GET "${l0}" text)
  string(JSON t1 GET "${l1}" text)
  string(JSON r1 GET "${l1}" finish_reason)
  string(JSON n2 LENGTH "${l2}" top_logprobs)
  string(JSON n2top LENGTH "${l2}" top_logprobs 0)
  if(NOT t0 STREQUAL want_text)
    message(FATAL_ERROR "text: expected '${want_text}', got '${t0}'")
  endif()
  if(NOT t1 STREQUAL ", there was a little girl named " OR NOT r1 STREQUAL "stop")
    message(FATAL_ERROR "stop string: got ${l1}")
  endif()
  if(NOT n2 EQUAL 8 OR NOT n2top EQUAL 2)
    message(FATAL_ERROR "logprobs: expected 8 rows of 2, got ${l2}")
  endif()

elseif(MODE STREQUAL "sampling")
  set(flags --model ${STORIES} --prompt "Once upon a time" --max-tokens 24 --json --backend cpu --threads 1
            --temperature 0.9 --top-k 40 --top-p 0.9 --min-p 0.02 --repetition-penalty 1.2
            --presence-penalty 0.3 --frequency-penalty 0.3)
  run_photon(a generate ${flags} --seed 11)
  run_photon(b generate ${flags} --seed 11)
  run_photon(c generate ${flags} --seed 12)
  if(NOT a STREQUAL b)
    message(FATAL_ERROR "same seed, different output:\n${a}\n${b}")
  endif()
  if(a STREQUAL c)
    message(FATAL_ERROR "seeds 11 and 12 gave the same 24 sampled tokens: ${a}")
  endif()
  # The same seeded request inside a batch gives the same tokens.
  string(JSON a_tokens GET "${a}" tokens)
  file(WRITE ${SCRATCH}/requests.jsonl
    "{\"prompt\": \"Lily and Ben\", \"max_tokens\": 30, \"temperature\": 1.0, \"seed\": 5}\n"
    "{\"id\": \"x\", \"prompt\": \"Once upon a time\", \"max_tokens\": 24, \"temperature\": 0.9, \"top_k\": 40, \"top_p\": 0.9, \"min_p\": 0.02, \"repetition_penalty\": 1.2, \"presence_penalty\": 0.3, \"frequency_penalty\": 0.3, \"seed\": 11}\n"
    "{\"prompt\": \"The dog\", \"max_tokens\": 30, \"temperature\": 0.5}\n")
  run_photon(out batch --model ${STORIES} --requests ${SCRATCH}/requests.jsonl --backend cpu --threads 1 --max-batch-tokens 5)
  output_lines("${out}" lines)
  list(GET lines 1 l1)
  string(JSON x_tokens GET "${l1}" tokens)
  string(JSON same EQUAL "${a_tokens}" "${x_tokens}")
  if(NOT same)
    message(FATAL_ERROR "seeded request alone ${a_tokens}, in a batch ${x_tokens}")
  endif()

elseif(MODE STREQUAL "errors")
  set(M ${GOLDEN}/llama3-tiny)
  file(WRITE ${SCRATCH}/not_json.jsonl "{\"tokens\": [1, 2], \"max_tokens\": 4}\n{\"tokens\": [1, 2\n")
  file(WRITE ${SCRATCH}/unknown.jsonl "{\"tokens\": [1, 2], \"max_tokenz\": 4}\n")
  file(WRITE ${SCRATCH}/wrong_type.jsonl "{\"tokens\": \"1 2\"}\n")
  file(WRITE ${SCRATCH}/out_of_vocab.jsonl "{\"id\": \"bad\", \"tokens\": [1, 5000], \"max_tokens\": 4}\n")
  file(WRITE ${SCRATCH}/too_long.jsonl "{\"tokens\": [1, 2], \"max_tokens\": 100}\n")
  file(WRITE ${SCRATCH}/text_no_tok.jsonl "{\"prompt\": \"hello\"}\n")
  file(WRITE ${SCRATCH}/empty.jsonl "\n\n")
  # 2^32 + 5 used to wrap to max_tokens 5; 1e39 overflowed float (examples/cli/batch_request.cpp)
  file(WRITE ${SCRATCH}/int_overflow.jsonl "{\"tokens\": [1, 2], \"max_tokens\": 4294967301}\n")
  file(WRITE ${SCRATCH}/float_overflow.jsonl "{\"tokens\": [1, 2], \"temperature\": 1e39}\n")
  set(cases
    "line 2|batch|--model|${M}|--requests|${SCRATCH}/not_json.jsonl"
    "unknown field|batch|--model|${M}|--requests|${SCRATCH}/unknown.jsonl"
    "wrong type|batch|--model|${M}|--requests|${SCRATCH}/wrong_type.jsonl"
    "max_tokens.*int32|batch|--model|${M}|--requests|${SCRATCH}/int_overflow.jsonl"
    "temperature.*float range|batch|--model|${M}|--requests|${SCRATCH}/float_overflow.jsonl"
    "outside the vocabulary|batch|--model|${M}|--requests|${SCRATCH}/out_of_vocab.jsonl"
    "KV cache|batch|--model|${M}|--requests|${SCRATCH}/too_long.jsonl|--kv-blocks|4|--block-size|16"
    "tokenizer|batch|--model|${M}|--requests|${SCRATCH}/text_no_tok.jsonl"
    "holds no request|batch|--model|${M}|--requests|${SCRATCH}/empty.jsonl"
    "cannot open|batch|--model|${M}|--requests|${SCRATCH}/absent.jsonl"
    "temperature|generate|--model|${M}|--tokens|1,2|--temperature|-1"
    "top_p|generate|--model|${M}|--tokens|1,2|--top-p|0")
  foreach(c ${cases})
    string(REPLACE "|" ";" args "${c}")
    list(POP_FRONT args what)
    execute_process(COMMAND ${PHOTON} ${args} --backend cpu RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc STREQUAL "1" OR NOT err MATCHES "error: " OR NOT err MATCHES "${what}")
      message(FATAL_ERROR "${args}: expected exit status 1 and an error mentioning '${what}', got '${rc}': ${err}")
    endif()
    message(STATUS "${what}: ${err}")
  endforeach()
else()
  message(FATAL_ERROR "unknown MODE '${MODE}'")
endif()
