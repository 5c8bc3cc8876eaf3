#!/usr/bin/env bash
# The C ABI check: compares BUILD/src/libphoton.so with the committed baseline
# abi/libphoton.so.<PHOTON_ABI_VERSION>.abixml using libabigail (abidw/abidiff,
# Debian's abigail-tools). Only photon.h's C ABI is compared (abi/c-abi.suppr
# leaves the C++ API out).
#
#   scripts/abi-check.sh BUILD          check (CI)
#   scripts/abi-check.sh BUILD --update rewrite the baseline after a compatible
#                                       change (refuses an incompatible one)
#
# Fails when:
#   - the ABI changed incompatibly (a removed or changed function, a struct
#     layout or enumerator change) and PHOTON_ABI_VERSION did not move: either
#     restore compatibility, or bump PHOTON_ABI_VERSION in CMakeLists.txt and
#     commit the new major's baseline with --update;
#   - the ABI grew (compatible) but the baseline was not updated;
#   - the baseline of this ABI major was rewritten incompatibly since it was
#     first committed (checked against git history when there is one);
#   - an exported photon_* function is not named in docs/CHANGELOG-API.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?usage: scripts/abi-check.sh BUILD_DIR [--update]}
MODE=${2:-check}
LIB="$BUILD/src/libphoton.so"
VERSION_H="$BUILD/include/photon/version.h"
SUPPR=abi/c-abi.suppr
[[ -f "$LIB" && -f "$VERSION_H" ]] || { echo "abi-check: build $BUILD first ($LIB, $VERSION_H)"; exit 1; }
command -v abidw >/dev/null || { echo "abi-check: abidw missing (apt-get install abigail-tools)"; exit 1; }

ABI=$(sed -n 's/^#define PHOTON_ABI_VERSION \([0-9]*\)$/\1/p' "$VERSION_H")
BASELINE="abi/libphoton.so.$ABI.abixml"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# The ABI of the exported functions as photon.h declares it: types defined
# elsewhere (the opaque handles' C++ insides) are dropped as private, which
# needs the header's absolute path as the DWARF records it.
dump() {  # dump LIB OUT
  abidw --no-corpus-path --no-comp-dir-path --no-show-locs --no-elf-needed \
    --exported-interfaces-only --drop-private-types --header-file "$PWD/include/photon/photon.h" \
    --suppressions "$SUPPR" --out-file "$2" "$1"
}
# compare OLD NEW -> the report in $TMP/report.txt; echoes one word:
#   same | added (only new functions/variables: compatible) | incompatible | error
# abidiff alone calls few changes incompatible (status bit 8), so any change
# it reports that is not an addition counts as incompatible. Two compatible
# changes are filtered before that: enumerators added to an enum (abidiff's
# harmless category) and fields appended to the structs that carry their own
# size (abi/c-abi.suppr).
compare() {
  local rc=0
  abidiff --no-show-locs --suppressions "$SUPPR" "$1" "$2" >"$TMP/report.txt" 2>&1 || rc=$?
  if (( rc & 3 )); then echo error; return; fi
  if (( rc == 0 )); then echo same; return; fi
  if (( rc & 8 )); then echo incompatible; return; fi
  local removed changed added
  removed=$(sed -n 's/^.*changes summary: \([0-9]*\) Removed.*/\1/p' "$TMP/report.txt" | awk '{s += $1} END {print s + 0}')
  changed=$(sed -n 's/^.*changes summary: [0-9]* Removed[^,]*, \([0-9]*\) Changed.*/\1/p' "$TMP/report.txt" | awk '{s += $1} END {print s + 0}')
  added=$(sed -n 's/^.*changes summary: .* \([0-9]*\) Added.*/\1/p' "$TMP/report.txt" | awk '{s += $1} END {print s + 0}')
  if [[ "${removed:-0}" == 0 && "${changed:-0}" == 0 && "${added:-0}" != 0 ]]; then
    echo added
  else
    echo incompatible
  fi
}

dump "$LIB" "$TMP/current.abixml"

if [[ "$MODE" == "--update" ]]; then
  if [[ -f "$BASELINE" ]]; then
    verdict=$(compare "$BASELINE" "$TMP/current.abixml")
    if [[ "$verdict" == incompatible || "$verdict" == error ]]; then
      cat "$TMP/report.txt"
      echo "abi-check: refusing to update $BASELINE with an incompatible change; bump PHOTON_ABI_VERSION instead"
      exit 1
    fi
  fi
  cp "$TMP/current.abixml" "$BASELINE"
  echo "abi-check: wrote $BASELINE (log the change in docs/CHANGELOG-API.md)"
  exit 0
fi

if [[ ! -f "$BASELINE" ]]; then
  echo "abi-check: no baseline $BASELINE for PHOTON_ABI_VERSION $ABI (baselines: $(ls abi/*.abixml 2>/dev/null | tr '\n' ' '))."
  echo "  A new ABI major commits its baseline: scripts/abi-check.sh $BUILD --update, and logs it in docs/CHANGELOG-API.md."
  exit 1
fi

status=0
case $(compare "$BASELINE" "$TMP/current.abixml") in
  same) ;;
  added)
    cat "$TMP/report.txt"
    echo "abi-check: the C ABI grew (compatible) but $BASELINE is stale: run scripts/abi-check.sh $BUILD --update"
    echo "  and log the additions in docs/CHANGELOG-API.md."
    status=1 ;;
  incompatible)
    cat "$TMP/report.txt"
    echo "abi-check: INCOMPATIBLE change against $BASELINE. Restore compatibility, or bump PHOTON_ABI_VERSION"
    echo "  (CMakeLists.txt), commit the new major's baseline (scripts/abi-check.sh $BUILD --update) and log it"
    echo "  in docs/CHANGELOG-API.md."
    status=1 ;;
  *)
    cat "$TMP/report.txt"; echo "abi-check: abidiff failed"; exit 1 ;;
esac

# The baseline itself must not have been rewritten incompatibly within its major.
if git rev-parse --git-dir >/dev/null 2>&1; then
  first=$(git log --diff-filter=A --format=%H -- "$BASELINE" | tail -n 1)
  if [[ -n "$first" ]]; then
    git show "$first:$BASELINE" > "$TMP/first.abixml"
    verdict=$(compare "$TMP/first.abixml" "$TMP/current.abixml")
    if [[ "$verdict" == incompatible || "$verdict" == error ]]; then
      cat "$TMP/report.txt"
      echo "abi-check: INCOMPATIBLE with $BASELINE as first committed (${first:0:12}): within ABI major $ABI"
      echo "  only additions are allowed; bump PHOTON_ABI_VERSION."
      status=1
    fi
  fi
fi

# Every exported C function is logged in docs/CHANGELOG-API.md.
missing=()
while read -r sym; do
  grep -q "\b$sym\b" docs/CHANGELOG-API.md || missing+=("$sym")
done < <(nm -D --defined-only "$LIB" | awk '$3 ~ /^photon_/ {print $3}' | sort)
if ((${#missing[@]})); then
  echo "abi-check: exported but not logged in docs/CHANGELOG-API.md: ${missing[*]}"
  status=1
fi

if ((status == 0)); then
  echo "abi-check: libphoton.so.$ABI C ABI matches $BASELINE ($(nm -D --defined-only "$LIB" | awk '$3 ~ /^photon_/' | wc -l) functions)"
fi
exit $status
