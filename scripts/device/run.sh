#!/usr/bin/env bash
# On the lent GPU machine (device tool), from the repository root: unpacks scripts/device/pack.sh's
# folder D (default .device/pack) into P=/tmp/pl, points LD_LIBRARY_PATH, PHOTON_TEST_DATA_DIR and
# PHOTON_MODELS_DIR at them, prints the GPU's clocks, then runs $CMD (which may use $P/photon,
# $P/photon_tests_cuda (scripts/device/cases.sh prints its failures one per line),
# $P/photon_decode_layers_bench, $P/photon_trace (pack.sh's TRACE),
# $P/photon_base (its BASE) and scripts/device/ab.sh).
# Example: D=.device/pack CMD='$P/photon_tests_cuda "cuda matmul*"' bash scripts/device/run.sh
set -u
D=${D:-.device/pack}
export P=/tmp/pl
mkdir -p $P
for f in photon photon_tests_cuda photon_decode_layers_bench photon_trace photon_base; do
  if [[ -f $D/$f.xz ]]; then xz -dc $D/$f.xz > $P/$f; chmod +x $P/$f; fi
done
[[ -f $D/libs.tar.xz ]] && tar -C $P -xJf $D/libs.tar.xz
export LD_LIBRARY_PATH=$P:${LD_LIBRARY_PATH:-}
export PHOTON_TEST_DATA_DIR=$PWD/tests/data
export PHOTON_MODELS_DIR=$PWD/models
[[ -d $D/fixtures ]] && export PHOTON_GPU_FIXTURES=$PWD/$D/fixtures
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
eval "$CMD"
