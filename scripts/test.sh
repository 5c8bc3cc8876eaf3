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

# ThreadSanitizer build of the engine's thread-safety tests ([thread]): a
# second, CPU-only build folder holding just the scheduler test executable.
# Warnings stay errors in the main build above; here GCC's -Wtsan notes
# (atomic_thread_fence, which TSan does not model) must not stop the build.
scripts/configure.sh build-tsan -DPHOTON_WERROR=OFF -DPHOTON_SANITIZE_THREAD=ON -DPHOTON_BUILD_CUDA=OFF \
  -DPHOTON_BUILD_EXAMPLES=OFF -DPHOTON_BUILD_BENCHMARKS=OFF
cmake --build build-tsan -j"$(nproc)" --target photon_tests_scheduler
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ./build-tsan/tests/photon_tests_scheduler "[thread]"
