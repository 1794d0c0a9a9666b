#!/usr/bin/env bash
# Faults a training run must survive or refuse cleanly, each a case that the
# trainer once got wrong (docs/reliability.md, "Training runs"):
#   full disk on metrics.jsonl, --out into a directory with other files, two
#   trainers in one run directory, --resume of a finished run, metrics.jsonl
#   a named pipe, a run directory whose name is not UTF-8, NaN for a number,
#   a run directory too long for its files, curves.svg a symbolic link, a
#   long output file name; preemption by a signal and a requeued job.
# Usage: faults.sh EMBER WORKDIR
set -uo pipefail
ember="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; work="$2"
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
small=(--model mlp --limit 1280 --batch-size 64 --workers 0)

# A one-line error on stderr containing $1, a non-zero exit below 128.
expect_error() {
    local want="$1"; shift
    timeout -s KILL 60 "$@" > "$work/out.txt" 2> "$work/err.txt"
    local rc=$?
    [ $rc -ne 0 ] || fail "'$*' succeeded; expected an error with '$want'"
    [ $rc -ne 137 ] || fail "'$*' hung (killed after 60 s)"
    [ $rc -lt 128 ] || fail "'$*' died of a signal (exit $rc)"
    grep -q -- "$want" "$work/err.txt" || fail "'$*': stderr lacks '$want': $(cat "$work/err.txt")"
    grep -q "^ember: error: " "$work/err.txt" || fail "'$*': no 'ember: error:' line: $(cat "$work/err.txt")"
    echo "ok: $want"
}

# 1. A full disk while metrics.jsonl is written: a clear error naming the
#    file (here the file-size limit stands in for the disk: EFBIG, with
#    SIGXFSZ ignored), not records silently lost.
(
    trap '' XFSZ
    ulimit -f 8   # 8 KiB per file: metrics.jsonl passes it before the epoch's end
    exec "$ember" train "${small[@]}" --limit 6400 --epochs 1 --log-every 1 --out "$work/full"
) > "$work/full.txt" 2> "$work/full.err"
rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] || fail "full disk: exit $rc: $(tail -2 "$work/full.err")"
grep -q "cannot write $work/full/metrics.jsonl: File too large" "$work/full.err" ||
    fail "full disk: $(cat "$work/full.err")"
echo "ok: a failed metrics write is an error naming metrics.jsonl"

# 2. --out into a directory that holds other files (--out . included):
#    refused, the files untouched.
mkdir -p "$work/mine"
echo "my notes" > "$work/mine/notes.txt"
expect_error "is not empty" "$ember" train "${small[@]}" --epochs 1 --out "$work/mine"
(cd "$work/mine" && expect_error "is not empty" "$ember" train "${small[@]}" --epochs 1 --out .) || exit 1
[ "$(ls "$work/mine")" = "notes.txt" ] && [ "$(cat "$work/mine/notes.txt")" = "my notes" ] ||
    fail "--out wrote into a directory with other files: $(ls -a "$work/mine")"
mkdir -p "$work/empty"
"$ember" train "${small[@]}" --epochs 1 --out "$work/empty" > /dev/null || fail "--out an empty directory"

# 3. Two trainers in one run directory: the second is refused, naming the
#    first one's pid; the first finishes unharmed.
"$ember" train "${small[@]}" --epochs 1 --out "$work/busy" --stop-after 2 > /dev/null
[ $? -eq 130 ] || fail "stop-after run"
"$ember" train --resume "$work/busy" --epochs 200 --extend > "$work/busy.txt" 2>&1 &
first=$!
for _ in $(seq 1 100); do
    grep -q "resuming after step 2" "$work/busy.txt" 2> /dev/null && break
    sleep 0.1
done
expect_error "is in use by another ember train (pid $first)" "$ember" train --resume "$work/busy"
kill -INT $first
wait $first
[ $? -eq 130 ] || fail "the first trainer did not stop cleanly: $(tail -2 "$work/busy.txt")"

# 4. --resume of a finished run: says so, trains nothing, changes nothing.
cp "$work/empty/last.safetensors" "$work/last.before"
"$ember" train --resume "$work/empty" > "$work/done.txt" 2>&1 || fail "resume of a finished run failed"
grep -q "is complete: 1 epochs, 20 steps; nothing to train" "$work/done.txt" ||
    fail "resume of a finished run: $(cat "$work/done.txt")"
cmp -s "$work/empty/last.safetensors" "$work/last.before" || fail "a finished run changed on --resume"
echo "ok: --resume of a finished run"

# 5. metrics.jsonl a named pipe: refused at once, never opened.
"$ember" train "${small[@]}" --epochs 1 --out "$work/pipe" --stop-after 3 > /dev/null
rm "$work/pipe/metrics.jsonl" && mkfifo "$work/pipe/metrics.jsonl"
expect_error "metrics.jsonl: it is not a regular file (a named pipe)" "$ember" train --resume "$work/pipe"

# 6. A run directory whose name is not UTF-8: curves.svg stays well-formed XML.
odd="$work/run-"$'\xff\xfe'"-odd"
"$ember" train "${small[@]}" --epochs 1 --out "$odd" > /dev/null || fail "run in a non-UTF-8 directory"
python3 -c "import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])" "$odd/curves.svg" ||
    fail "curves.svg of a non-UTF-8 run directory is not well-formed"
echo "ok: curves.svg of a non-UTF-8 directory name"

# 7. NaN for a number is refused, not taken as "off" or a huge budget.
expect_error "--clip-grad: 'nan' is not a finite number" "$ember" train "${small[@]}" --clip-grad nan --out "$work/x"
expect_error "--memory-budget: 'nan' is not a finite number" "$ember" max-batch --model mlp --memory-budget nan
[ ! -e "$work/x" ] || fail "a refused start left a run directory"

# 8. A run directory too long for its files fails at the start, leaving nothing.
long="$work"
for _ in $(seq 1 17); do long="$long/$(printf 'd%.0s' $(seq 1 230))"; done
expect_error "bytes long; the run's files inside it would pass" "$ember" train "${small[@]}" --out "$long"
[ ! -e "$work/ddd" ] && [ -z "$(find "$work" -maxdepth 1 -name 'dd*')" ] || fail "a refused long --out was created"

# 9. curves.svg a symbolic link: written through, the link kept.
mv "$work/empty/curves.svg" "$work/elsewhere.svg"
ln -s "$work/elsewhere.svg" "$work/empty/curves.svg"
"$ember" plot "$work/empty" > /dev/null || fail "plot through a link"
[ -L "$work/empty/curves.svg" ] || fail "curves.svg is no longer a link"
grep -q "<svg" "$work/elsewhere.svg" || fail "the link's target was not written"
echo "ok: curves.svg written through its link"

# 10. An output file name of 250 bytes (lr-find's chart): written, no
#     temporary left beside it.
name="$work/$(printf 'c%.0s' $(seq 1 246)).svg"
"$ember" lr-find "${small[@]}" --steps 20 --out "$name" > /dev/null 2>&1 || fail "lr-find --out a 250-byte name"
[ -s "$name" ] || fail "lr-find did not write its 250-byte name"
[ -z "$(find "$work" -maxdepth 1 -name '*ember-tmp*')" ] || fail "a temporary was left behind"
echo "ok: a 250-byte output name"
# 11. Preemption as a cluster does it (Slurm: --signal=USR1@T, --requeue):
#     SIGUSR1 mid-run checkpoints and exits 138 (128 + 10); the same command
#     line again, with --resume auto, continues; the final weights and
#     checkpoint are byte-identical to an uninterrupted run's.
job=(train --model mlp --limit 6400 --epochs 2 --batch-size 64 --workers 0 --log-every 5 --resume auto)
"$ember" "${job[@]}" --out "$work/straight" > /dev/null || fail "uninterrupted --resume auto run"
"$ember" "${job[@]}" --out "$work/pre" > "$work/pre1.txt" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
    grep -q "step 10/" "$work/pre1.txt" 2> /dev/null && break
    sleep 0.05
done
kill -USR1 $pid
wait $pid
rc=$?
[ $rc -eq 138 ] || fail "SIGUSR1: exit $rc, expected 138: $(tail -3 "$work/pre1.txt")"
grep -q "interrupted after step" "$work/pre1.txt" || fail "SIGUSR1: no checkpoint message"
"$ember" "${job[@]}" --out "$work/pre" > "$work/pre2.txt" 2>&1 || fail "requeued run: $(tail -3 "$work/pre2.txt")"
grep -q "(resuming after step" "$work/pre2.txt" || fail "the requeued run did not resume: $(head -9 "$work/pre2.txt")"
cmp -s "$work/pre/last.safetensors" "$work/straight/last.safetensors" || fail "requeued weights differ"
cmp -s "$work/pre/checkpoint/state.safetensors" "$work/straight/checkpoint/state.safetensors" ||
    fail "requeued checkpoint differs"
echo "ok: SIGUSR1, then the same command with --resume auto, ends byte-identical"
# A job killed before its first checkpoint: the same command starts it again
# (its own files replaced), but never over a file it did not write.
mkdir -p "$work/early" && cp "$work/pre/config.toml" "$work/early/" && echo '{}' > "$work/early/metrics.jsonl"
"$ember" "${job[@]}" --epochs 1 --out "$work/early" > "$work/early.txt" 2>&1 ||
    fail "--resume auto over a run without a checkpoint: $(tail -2 "$work/early.txt")"
mkdir -p "$work/other" && echo "x" > "$work/other/notes.txt"
expect_error "is not empty" "$ember" "${job[@]}" --out "$work/other"
expect_error "--resume auto needs --out" "$ember" train --model mlp --resume auto
expect_error "--stop-signals: 'KILL'" "$ember" train "${small[@]}" --stop-signals INT,KILL --out "$work/x"

# 12. A config file: `key = true` on an option that takes a value does not
#     swallow the next line, `false` is a value, a BOM, trailing comments and
#     TOML's single quotes are understood, and settings that act on a run
#     (stop-after, resume, config) are refused.
printf '\xef\xbb\xbfout = true\nepochs = 2  # two\ndata = '"'"'fashion-mnist'"'"'\nddp = false\n' > "$work/c.toml"
"$ember" train --config "$work/c.toml" --dump-config > "$work/dump.txt" 2>&1 || fail "config: $(cat "$work/dump.txt")"
grep -qx 'epochs=2' "$work/dump.txt" && grep -qxE 'out="?true"?' "$work/dump.txt" &&
    grep -qx 'data="fashion-mnist"' "$work/dump.txt" || fail "config file read wrong: $(grep -E '^(out|epochs|data)=' "$work/dump.txt")"
echo "ok: config values, comments, BOM and quotes"
printf 'stop-after = 3\n' > "$work/c2.toml"
expect_error "'stop-after' cannot be set from a file" "$ember" train --config "$work/c2.toml" --out "$work/x"

# 13. --resume with a flag that changes the data stream is refused, naming
#     it; an --epochs below what the run has trained says what to give.
"$ember" train "${small[@]}" --epochs 2 --out "$work/stream" --stop-after 25 > /dev/null
[ $? -eq 130 ] || fail "stream run"
cp "$work/stream/config.toml" "$work/stream.toml"
expect_error "--batch-size 32 differs from the run's 64" "$ember" train --resume "$work/stream" --batch-size 32
expect_error "--seed 7 differs from the run's 0" "$ember" train --resume "$work/stream" --seed 7
expect_error "--limit 640 differs from the run's 1280" "$ember" train --resume "$work/stream" --limit 640
expect_error "--data \"synthetic\" differs" "$ember" train --resume "$work/stream" --data synthetic
expect_error "--epochs 1 is below the 1 epoch(s) the run has trained and begun; give --epochs 2" \
    "$ember" train --resume "$work/stream" --epochs 1
cmp -s "$work/stream/config.toml" "$work/stream.toml" || fail "a refused --resume rewrote config.toml"
# A checkpoint whose step does not match its epoch and batch is refused.
cp -r "$work/stream" "$work/tampered"
python3 - "$work/tampered/checkpoint/state.safetensors" <<'PY' || fail "tampering"
import json, struct, sys
path = sys.argv[1]
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = raw[8:8 + n].decode()
assert '\\"step\\":25' in header, header[:300]
header = header.replace('\\"step\\":25', '\\"step\\":26')
open(path, "wb").write(raw[:8] + header.encode() + raw[8 + n:])
PY
expect_error "step 26 does not match epoch 1, batch 5 (expected step 25)" "$ember" train --resume "$work/tampered"
"$ember" train --resume "$work/stream" > /dev/null || fail "resume with the run's own settings"

# 14. Options that contradict the run: --warmup as long as the run is an
#     error, --save-every beyond it a warning.
expect_error "--warmup 100 is not shorter than the run (20 steps)" \
    "$ember" train "${small[@]}" --epochs 1 --warmup 100 --out "$work/x"
"$ember" train "${small[@]}" --epochs 1 --save-every 500 --out "$work/late" > /dev/null 2> "$work/late.err" ||
    fail "--save-every beyond the run"
grep -q "warning: --save-every 500 is beyond the run's 20 steps" "$work/late.err" || fail "no --save-every warning"

# 15. Damaged checkpoints: a flipped bit is found by the tensors' checksums
#     (never trained on); with --keep-checkpoints the resume says so and falls
#     back to the newest older one, and the run still ends with the bytes of an
#     uninterrupted run; a truncated one likewise.
flip() {  # flips one bit of the tensor data of a safetensors file
    python3 - "$1" <<'PY'
import struct, sys
path = sys.argv[1]
raw = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
raw[8 + n + 1000] ^= 0x10
open(path, "wb").write(bytes(raw))
PY
}
keep=("${small[@]}" --save-every 5 --keep-checkpoints 3)
"$ember" train "${keep[@]}" --epochs 2 --out "$work/keep-straight" > /dev/null || fail "keep: straight run"
"$ember" train "${keep[@]}" --epochs 2 --stop-after 20 --out "$work/keep" > /dev/null
[ $? -eq 130 ] || fail "keep: the first 20 steps"
[ "$(ls "$work/keep/checkpoint" | tr '\n' ' ')" = "state.safetensors step-00000010.safetensors step-00000015.safetensors step-00000020.safetensors " ] ||
    fail "kept checkpoints: $(ls "$work/keep/checkpoint")"
flip "$work/keep/checkpoint/state.safetensors"
"$ember" train --resume "$work/keep" > "$work/keep.txt" 2> "$work/keep.err" ||
    fail "keep: resume after a flipped bit: $(tail -2 "$work/keep.err")"
grep -q "warning: checkpoint $work/keep/checkpoint/state.safetensors cannot be used (.*the checksum of '.*' does not match.*); resuming from $work/keep/checkpoint/step-00000015.safetensors (step 15)" "$work/keep.err" ||
    fail "keep: no fallback message: $(cat "$work/keep.err")"
cmp -s "$work/keep/last.safetensors" "$work/keep-straight/last.safetensors" || fail "keep: the fallen-back run ends differently"
echo "ok: a flipped bit falls back to the previous checkpoint, and the run ends byte-identical"
truncate -s 4000 "$work/keep/checkpoint/state.safetensors"
"$ember" train --resume "$work/keep" --epochs 3 --extend > /dev/null 2> "$work/keep3.err" || fail "keep: resume after truncation"
grep -q "cannot be used" "$work/keep3.err" || fail "keep: a truncated checkpoint was not reported"
echo "ok: a truncated checkpoint falls back"
"$ember" train "${small[@]}" --epochs 1 --out "$work/one" > /dev/null || fail "one checkpoint run"
flip "$work/one/checkpoint/state.safetensors"
expect_error "does not match: the file was damaged after it was written); no older checkpoint to fall back to" \
    "$ember" train --resume "$work/one" --epochs 2 --extend

# 16. Messages with the context to act on: a word for a number, a range
#     without DBL_MAX's 309 digits, a path too long for the file system
#     (once an uncaught exception: an abort), a number too large in
#     metrics.jsonl (the file and line named).
expect_error "--epochs: 'five' is not a whole number" "$ember" train --epochs five
expect_error "--memory-budget: 'five' is not a number" "$ember" max-batch --model mlp --memory-budget five
expect_error "--memory-budget: -1 is not positive" "$ember" max-batch --model mlp --memory-budget -1
[ "$(wc -c < "$work/err.txt")" -lt 200 ] || fail "a range message of $(wc -c < "$work/err.txt") bytes"
expect_error "no such run directory (File name too long)" "$ember" train --resume "$work/$(printf 'x%.0s' $(seq 1 300))"
mkdir -p "$work/big" && echo '{"kind": "step", "step": 1, "loss": 1e999}' > "$work/big/metrics.jsonl"
expect_error "big/metrics.jsonl:1: a number out of range" "$ember" plot "$work/big"

# 17. A second stop signal exits at once and says so (once it exited 130
#     printing nothing). The run is stopped, sent SIGINT and SIGTERM, then
#     continued: the handler sees both, one after the other.
"$ember" train "${small[@]}" --limit 64000 --epochs 5 --out "$work/twice" > "$work/twice.txt" 2> "$work/twice.err" &
pid=$!
for _ in $(seq 1 600); do
    grep -q "step 50/" "$work/twice.txt" 2> /dev/null && break
    sleep 0.05
done
kill -STOP $pid && kill -INT $pid && kill -TERM $pid && kill -CONT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] || fail "two signals: exit $rc, expected 130"
grep -q "interrupted again: exiting now, without a checkpoint of this step" "$work/twice.err" ||
    fail "two signals: no word on stderr: $(cat "$work/twice.err")"
echo "ok: a second signal exits at once, saying so"

echo "faults: all passed"
