#!/usr/bin/env bash
# The README's first command: install dependencies, build, and generate text
# with the bundled stories260K model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/configure.sh build
cmake --build build -j"$(nproc)"
./build/examples/cli/photon generate --model models/stories260K --prompt "Once upon a time" --max-tokens 64
