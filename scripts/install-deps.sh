#!/usr/bin/env bash
# Installs photon's build and test dependencies from Debian 12 packages.
# Idempotent and quick when everything is already there. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git xz-utils
  libfmt-dev nlohmann-json3-dev libpcre2-dev libsentencepiece-dev libicu-dev
  libcpp-httplib-dev libcli11-dev catch2 libbenchmark-dev
  # C ABI checks and the examples against the installed package (scripts/check-package.sh):
  # libabigail's abidw/abidiff, jq for the golden files, valgrind for the leak test, Go for examples/go.
  abigail-tools jq valgrind golang-go
)
# examples/rust needs cargo; a rustup toolchain already on PATH is used as it is.
if ! command -v cargo >/dev/null; then
  PACKAGES+=(cargo)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
