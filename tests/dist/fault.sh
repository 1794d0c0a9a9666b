#!/usr/bin/env bash
# A rank that stalls or dies must end the job with a message, never hang.
# Usage: fault.sh MPIEXEC DIST_FAULT stall|kill
set -uo pipefail
mpiexec="$1"; prog="$2"; mode="$3"
out=$(mktemp); trap 'rm -f "$out"' EXIT
start=$(date +%s)
timeout 90 "$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$prog" "$mode" >"$out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
fail() { echo "FAIL ($mode): $*"; exit 1; }
[ "$rc" -ne 0 ] || fail "the job exited 0"
[ "$rc" -ne 124 ] || fail "the job hung until the test's own timeout"
[ "$elapsed" -lt 45 ] || fail "the job took ${elapsed} s to end"
case "$mode" in
stall)
    grep -q "all_reduce sum (bucket 0, 1000 f32 elements) did not complete within 2 s on rank 0 of 2: rank(s) 1 did not arrive" "$out" ||
        fail "rank 0 did not name the collective and the stalled rank" ;;
kill)
    grep -qiE "signal 9|killed|exited on signal" "$out" || fail "no message about the dead rank" ;;
esac
echo "ok: $mode ended in ${elapsed} s with status $rc"
