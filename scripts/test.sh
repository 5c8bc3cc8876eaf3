#!/usr/bin/env bash
# The README's second command (and CI's): install dependencies, build with
# warnings as errors, run every CPU test (ctest -LE cuda) and the packaging,
# C ABI and sanitizer checks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/configure.sh build -DPHOTON_WERROR=ON
cmake --build build -j"$(nproc)"
ctest --test-dir build -LE cuda --output-on-failure -j"$(nproc)"
# C ABI: libphoton.so's exported C ABI against the committed baseline (~1 s).
scripts/abi-check.sh build
