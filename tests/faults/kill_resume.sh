#!/usr/bin/env bash
# Random kills of a training run, each followed by the same command with
# --resume auto until the run completes: every trial must end with weights
# and a checkpoint byte-identical to an uninterrupted run. Odd trials kill
# with SIGKILL (nothing runs after it), even ones with SIGTERM (the run
# checkpoints and exits 143 — whether the signal lands in a step, in the
# evaluation or in a checkpoint write). Then a full disk during a checkpoint
# write: an error, the previous checkpoint intact, no temporary left.
# Usage: kill_resume.sh EMBER WORKDIR [TRIALS (default 3)] [SEED (default 1)]
# The default test run takes 3 trials; `tools/dev check` takes 50.
set -uo pipefail
ember="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; work="$2"
trials="${3:-3}"; RANDOM="${4:-1}"
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
job=(train --model mlp --limit 3200 --batch-size 64 --epochs 2 --workers 0 --save-every 7
     --log-every 5 --resume auto)

"$ember" "${job[@]}" --out "$work/straight" > /dev/null || fail "the uninterrupted run"
start=$(date +%s%N)
"$ember" "${job[@]}" --out "$work/timing" > /dev/null || fail "the timing run"
run_ms=$(( ($(date +%s%N) - start) / 1000000 ))

kills=0
for trial in $(seq 1 "$trials"); do
    dir="$work/trial-$trial"
    signal=$([ $((trial % 2)) -eq 1 ] && echo KILL || echo TERM)
    for attempt in 1 2 3 4 5 6; do
        "$ember" "${job[@]}" --out "$dir" > "$work/out.txt" 2>&1 &
        pid=$!
        # A random moment of the run (start-up, steps, evaluation, checkpoints).
        delay_ms=$(( RANDOM % (run_ms + 1) ))
        sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
        if [ $attempt -le 2 ] && kill -s "$signal" $pid 2> /dev/null; then
            wait $pid 2> /dev/null
            rc=$?
            kills=$((kills + 1))
            case "$signal:$rc" in
                KILL:137 | KILL:0 | TERM:143 | TERM:0) ;;
                *) fail "trial $trial: SIG$signal after $delay_ms ms: exit $rc: $(tail -3 "$work/out.txt")" ;;
            esac
        else
            wait $pid || fail "trial $trial: run $attempt failed: $(tail -3 "$work/out.txt")"
        fi
        grep -q "^done:\|is complete" "$work/out.txt" && break
    done
    # One more time to finish, in case the last kill came after "done:" was decided.
    "$ember" "${job[@]}" --out "$dir" > "$work/out.txt" 2>&1 || fail "trial $trial: final run: $(tail -3 "$work/out.txt")"
    cmp -s "$dir/last.safetensors" "$work/straight/last.safetensors" ||
        fail "trial $trial (SIG$signal): final weights differ from the uninterrupted run"
    cmp -s "$dir/checkpoint/state.safetensors" "$work/straight/checkpoint/state.safetensors" ||
        fail "trial $trial (SIG$signal): final checkpoint differs"
    [ -z "$(find "$dir" -name '*.ember-tmp-*')" ] || fail "trial $trial: temporaries left: $(find "$dir" -name '*.ember-tmp-*')"
done
echo "ok: $trials trials, $kills kills (SIGKILL and SIGTERM at random moments of a ${run_ms} ms run): every run ended byte-identical"

# A full disk while a checkpoint is written (a 4 MiB file-size limit against
# a 6.4 MB checkpoint): an error naming the file, the previous checkpoint
# untouched, no temporary left.
"$ember" "${job[@]}" --out "$work/full" --stop-after 7 > /dev/null
[ $? -eq 130 ] || fail "full disk: the first checkpoint"
cp "$work/full/checkpoint/state.safetensors" "$work/before.safetensors"
(
    trap '' XFSZ
    ulimit -f 4096
    exec "$ember" "${job[@]}" --out "$work/full"
) > "$work/full.txt" 2> "$work/full.err"
rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] || fail "full disk: exit $rc"
grep -q "state.safetensors.*File too large" "$work/full.err" || fail "full disk: $(cat "$work/full.err")"
cmp -s "$work/full/checkpoint/state.safetensors" "$work/before.safetensors" || fail "full disk: the checkpoint changed"
[ -z "$(find "$work/full" -name '*.ember-tmp-*')" ] || fail "full disk: a temporary was left"
"$ember" "${job[@]}" --out "$work/full" > /dev/null || fail "full disk: the resume after it"
cmp -s "$work/full/last.safetensors" "$work/straight/last.safetensors" || fail "full disk: the resumed run differs"
echo "ok: a full disk during a checkpoint keeps the previous one, and the run resumes to the same bytes"
echo "kill_resume: all passed"
