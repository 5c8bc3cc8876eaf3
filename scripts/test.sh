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
scripts/configure.sh build-tsan -DPHOTON_WERROR=ON -DPHOTON_SANITIZE_THREAD=ON -DPHOTON_BUILD_CUDA=OFF
# The same build also holds the C API's threads test (tests/capi/test_threads.c:
# threads submitting and cancelling while one steps and one polls); its extra
# cost is linking libphoton.so and one C file (~10 s) plus ~2 s of running.
# And photon-server's tests (handler threads, the event dispatcher, the
# engine loop; ~6 server files and 5 test files more, ~5 s of running).
cmake --build build-tsan -j"$(nproc)" --target photon_tests_scheduler photon_capi_test_threads photon_server_tests
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ./build-tsan/tests/photon_tests_scheduler "[thread]"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ./build-tsan/tests/photon_capi_test_threads
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ./build-tsan/examples/server/tests/photon_server_tests

# Install into build/install-test and build + run the C, CMake, Rust and Go
# examples against the installed package, checking their tokens against the
# goldens; then uninstall (~1-2 min, most of it the first cargo and go builds).
scripts/check-package.sh build
