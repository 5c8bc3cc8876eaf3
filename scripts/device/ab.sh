#!/usr/bin/env bash
# Same-call A/B of environment configurations: R rounds, each running `photon bench` once per
# configuration in turn (the first bench of a call runs 1-2% slow, so configurations alternate).
# CONFIGS: ';'-separated lists of VAR=value ('-' for none); BIN=path in a list runs that photon
# instead of $P/photon (e.g. BIN=$P/photon_base, pack.sh's BASE); ARG=flag adds one bench flag to
# that configuration's runs (e.g. "ARG=--int8;ARG=--int8-lm-head"). Prints ms/token and ms/step per run.
# Env: R (3), BATCHES (1), CFG (tests/data/configs/Llama-3.2-1B.json), SHAPE (128x128), EXTRA
# (more bench flags), P (where run.sh unpacked photon).
# Example: CONFIGS="-;PHOTON_CUDA_SAMPLE_IN_GRAPH=0" R=3 bash scripts/device/ab.sh
R=${R:-3}; BATCHES=${BATCHES:-1}; CFG=${CFG:-tests/data/configs/Llama-3.2-1B.json}; SHAPE=${SHAPE:-128x128}
IFS=';' read -ra CS <<< "$CONFIGS"
for r in $(seq 1 $R); do
  for c in "${CS[@]}"; do
    e=$c; [ "$e" = "-" ] && e=""
    bin=$P/photon
    vars=""; args=""
    for kv in $e; do
      case $kv in
        BIN=*) bin=${kv#BIN=} ;;
        ARG=*) args="$args ${kv#ARG=}" ;;
        *) vars="$vars $kv" ;;
      esac
    done
    out=$(env $vars $bin bench --config $CFG --random-weights --shapes $SHAPE --ttft-prompts 128 --repeats 3 \
          --batches $BATCHES --json ${EXTRA:-} $args 2>&1)
    echo "[$c] r$r: $(echo "$out" | python3 "$(dirname "$0")/summary.py" --line)"
  done
done
