#!/usr/bin/env bash
# Packs what a run on the lent GPU machine needs and the repository does not carry: the CUDA test
# executable, the CLI (photon bench), the persistent-kernel bench, and the shared libraries the
# machine lacks or has in an incompatible version (Debian 12's ICU 72; its sentencepiece 0.1.97:
# the machine's 0.2.0 has the same soname and another C++ class layout, and photon built here
# crashes inside it, session 15; fmt and PCRE2 are there), xz-compressed into an ignored folder
# to name in the device tool's `carry` (about 30 MB).
# Usage: scripts/device/pack.sh [BUILD_DIR (build)] [OUT_DIR (.device/pack)]
# FIXTURES=DIR (a copy of ../shared/data/golden) also copies its two GPU-only goldens (27 MB) for
# the three test cases that need PHOTON_GPU_FIXTURES, and packs the test executable alone, so that
# the carry stays under the tool's 64 MiB with the repository.
# TRACE=DIR (a build configured with -DPHOTON_CUDA_STEP_TRACE=ON) also packs its CLI as photon_trace
# (scripts/device/step_trace_report.py reads what it writes).
# BASE=DIR (another build, e.g. main's) also packs its CLI as photon_base, for same-call A/B of two
# builds (ab.sh's BIN=$P/photon_base).
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
O=${2:-.device/pack}
mkdir -p "$O"
targets=(examples/cli/photon tests/photon_tests_cuda tests/bench/photon_decode_layers_bench)
[[ -n "${FIXTURES:-}" ]] && targets=(tests/photon_tests_cuda)
rm -f "$O"/*.xz
for f in "${targets[@]}"; do
  [[ -x "$B/$f" ]] || { echo "pack: $B/$f missing (build with CUDA first)"; exit 1; }
  xz -T0 -6 -c "$B/$f" > "$O/$(basename "$f").xz" &
done
if [[ -n "${BASE:-}" ]]; then
  [[ -x "$BASE/examples/cli/photon" ]] || { echo "pack: $BASE/examples/cli/photon missing"; exit 1; }
  xz -T0 -6 -c "$BASE/examples/cli/photon" > "$O/photon_base.xz" &
fi
if [[ -n "${TRACE:-}" ]]; then
  [[ -x "$TRACE/examples/cli/photon" ]] || { echo "pack: $TRACE/examples/cli/photon missing"; exit 1; }
  xz -T0 -6 -c "$TRACE/examples/cli/photon" > "$O/photon_trace.xz" &
fi
libs=()
for l in $(ldd "$B/tests/photon_tests_cuda" | awk '/libicu|libsentencepiece/ {print $3}'); do libs+=("$(basename "$l")"); done
if ((${#libs[@]})); then tar -C /lib/x86_64-linux-gnu -chf - "${libs[@]}" | xz -T0 -6 > "$O/libs.tar.xz"; fi
if [[ -n "${FIXTURES:-}" ]]; then
  mkdir -p "$O/fixtures"
  cp -r "$FIXTURES/llama3-small-hd64" "$FIXTURES/qwen3-small-hd128" "$O/fixtures/"
fi
wait
du -sh "$O"; ls -la "$O"
