#!/usr/bin/env bash
# On the lent GPU machine (after run.sh unpacked the pack into $P): runs the CUDA test cases that
# match PATTERN (Catch2: one comma-separated pattern) under a time limit and prints each failed
# assertion on one line (Catch2's compact reporter: file:line, expression or message), then the
# totals, so that a failure's cause survives the device tool's 12,000-character output tail.
# Usage: [LIMIT=seconds (300)] [SHOW=lines (40)] bash scripts/device/cases.sh "cuda int8*,cuda golden*"
# Exit status: the test executable's (124 when the limit cut it off).
set -u
pattern=${1:?usage: cases.sh PATTERN}
out=$(mktemp)
timeout "${LIMIT:-300}" "$P/photon_tests_cuda" "$pattern" -r compact > "$out" 2>&1
rc=$?
grep -E ": failed: " "$out" | head -n "${SHOW:-40}"
grep -E "^(Passed|Failed|No test cases)" "$out" | tail -n 1
[[ $rc -eq 124 ]] && echo "cases.sh: cut off after ${LIMIT:-300} s"
rm -f "$out"
exit $rc
