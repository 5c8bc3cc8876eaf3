#!/usr/bin/env bash
# The install + consumer check (scripts/test.sh runs it after the tests):
# installs BUILD into a prefix inside it, builds every example against the
# INSTALLED package only (never the build tree), runs each on stories260K and
# checks its token ids against the golden greedy ids, then uninstalls and
# checks that the prefix is empty.
#
#   examples/c               plain C99, pkg-config
#   examples/cmake-consumer  find_package(photon) + photon::photon (and photon::photon_static)
#   examples/rust            cargo, hand-written extern "C" declarations, no crates
#   examples/go              cgo, #cgo pkg-config: photon
#
# Usage: scripts/check-package.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$(realpath "${1:-build}")
PREFIX=$BUILD/install-test
WORK=$BUILD/examples-installed
MODEL=$ROOT/models/stories260K
GOLDENS=(once_upon_a_time lily_and_ben unicode_byte_fallback)  # the examples' prompts, in order

# Runs a command with its output in LOG, printing the log if it fails.
logged() {  # logged LOG COMMAND...
  local log=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    echo "check-package: failed: $*"
    cat "$log"
    exit 1
  fi
}

step_start=0
step() { step_start=$SECONDS; echo "check-package: $*"; }
done_step() { echo "check-package:   ok ($((SECONDS - step_start)) s)"; }

# Every "request I tokens: ..." line equals the golden generated ids of prompt I.
check_output() {  # check_output NAME OUTPUT_FILE
  local i want
  for i in "${!GOLDENS[@]}"; do
    want="request $i tokens: $(jq -r '.generated_ids | map(tostring) | join(" ")' "$MODEL/golden/${GOLDENS[$i]}.json")"
    if ! grep -qxF "$want" "$2"; then
      echo "check-package: $1: request $i differs from golden ${GOLDENS[$i]}"
      echo "  want: $want"
      echo "  got:  $(grep "^request $i tokens:" "$2" || echo '(no line)')"
      cat "$2"
      exit 1
    fi
  done
}

rm -rf "$PREFIX" "$WORK"
mkdir -p "$WORK"
step "install into $PREFIX"
logged "$WORK/install.log" cmake --install "$BUILD" --prefix "$PREFIX"
LIBDIR=$(dirname "$(find "$PREFIX" -name 'libphoton.so' -print -quit)")
export PKG_CONFIG_PATH="$LIBDIR/pkgconfig"
export LD_LIBRARY_PATH="$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
test -x "$PREFIX/bin/photon"
"$PREFIX/bin/photon" --help >/dev/null
env -u LD_LIBRARY_PATH "$PREFIX/bin/photon-server" --help >/dev/null  # finds libphoton.so through its RPATH
test "$(pkg-config --modversion photon)" = "$(sed -n 's/^#define PHOTON_VERSION_STRING "\(.*\)"$/\1/p' "$PREFIX/include/photon/version.h")"
done_step

step "examples/c (pkg-config)"
logged "$WORK/c-build.log" make -C examples/c BUILD="$WORK"
"$WORK/photon-c-example" "$MODEL" >"$WORK/c.out"
check_output c "$WORK/c.out"
if ! grep -qE '^generate: [0-9]+ tokens \(length\), same as request 0: yes$' "$WORK/c.out"; then
  echo "check-package: c: the blocking photon_engine_generate_text differs from the polled request 0"
  cat "$WORK/c.out"
  exit 1
fi
done_step

step "examples/cmake-consumer (find_package, shared and static)"
logged "$WORK/cmake-configure.log" cmake -S examples/cmake-consumer -B "$WORK/cmake" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX"
logged "$WORK/cmake-build.log" cmake --build "$WORK/cmake"
"$WORK/cmake/photon-cmake-example" "$MODEL" >"$WORK/cmake.out"
check_output cmake-consumer "$WORK/cmake.out"
"$WORK/cmake/photon-cmake-example-static" "$MODEL" >"$WORK/cmake-static.out"
check_output cmake-consumer-static "$WORK/cmake-static.out"
done_step

step "examples/rust (cargo, extern \"C\")"
logged "$WORK/rust-build.log" env CARGO_TARGET_DIR="$WORK/rust" \
  cargo build --offline --release --manifest-path examples/rust/Cargo.toml
"$WORK/rust/release/photon-rust-example" "$MODEL" >"$WORK/rust.out"
check_output rust "$WORK/rust.out"
done_step

step "examples/go (cgo)"
logged "$WORK/go-build.log" env -C examples/go GOCACHE="$WORK/go-cache" GOPATH="$WORK/go-path" GOPROXY=off \
  GOFLAGS=-mod=readonly go build -o "$WORK/photon-go-example" .
"$WORK/photon-go-example" "$MODEL" >"$WORK/go.out"
check_output go "$WORK/go.out"
done_step

step "uninstall"
logged "$WORK/uninstall.log" cmake --build "$BUILD" --target uninstall
left=$(find "$PREFIX" -type f -o -type l | wc -l)
if [[ "$left" != 0 ]]; then
  echo "check-package: uninstall left files behind:"; find "$PREFIX" -type f -o -type l
  exit 1
fi
done_step
echo "check-package: the installed package serves C, CMake, Rust and Go consumers"
