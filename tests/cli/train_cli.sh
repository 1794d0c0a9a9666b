#!/usr/bin/env bash
# End-to-end tests of `ember train` and `ember eval` through the binary.
# Usage: train_cli.sh EMBER CASE WORKDIR   (CASE: run | resume | signal | errors | finders | ddp | gpt | diverge | profile | diff | doctor)
# The ddp case runs `$EMBER_MPIEXEC -np 2 ember train --ddp`.
set -uo pipefail
ember="$1"; case_name="$2"; work="$3"
rm -rf "$work"; mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

# `ember: error: ...` on stderr, a non-zero exit, no crash; the message must
# contain $1.
expect_error() {
    local want="$1"; shift
    "$@" > "$work/out.txt" 2> "$work/err.txt"
    local rc=$?
    [ $rc -ne 0 ] || fail "'$*' succeeded; expected an error with '$want'"
    [ $rc -lt 128 ] || fail "'$*' died of a signal (exit $rc)"
    grep -q -- "$want" "$work/err.txt" || fail "'$*': stderr lacks '$want': $(cat "$work/err.txt")"
    grep -q "^ember: error: " "$work/err.txt" || fail "'$*': no 'ember: error:' line: $(cat "$work/err.txt")"
    grep -qiE "terminate called|Aborted|core dumped|Segmentation" "$work/err.txt" &&
        fail "'$*' crashed: $(cat "$work/err.txt")"
    echo "ok: $want"
}

case "$case_name" in
run)
    "$ember" train --model mlp --limit 10000 --epochs 2 --out "$work/run" --log-every 20 \
        > "$work/train.txt" || fail "train failed: $(tail -5 "$work/train.txt")"
    for f in config.toml metrics.jsonl last.safetensors best.safetensors curves.svg \
             checkpoint/state.safetensors; do
        [ -s "$work/run/$f" ] || fail "missing $f"
    done
    python3 - "$work/run/metrics.jsonl" <<'PY' || fail "metrics.jsonl"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rows if r["kind"] == "step"]
epochs = [r for r in rows if r["kind"] == "epoch"]
assert len(epochs) == 2, epochs
assert all(k in steps[0] for k in ("step", "loss", "lr", "samples_per_s", "data_wait", "host_syncs"))
assert epochs[-1]["test_acc"] >= 0.80, epochs[-1]
print("metrics ok: final test accuracy", epochs[-1]["test_acc"])
PY
    python3 -c "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])" "$work/run/curves.svg" ||
        fail "curves.svg is not well-formed XML"
    reported=$(grep -o "test accuracy [0-9.]*%" "$work/train.txt" | tail -1)
    "$ember" eval --model mlp --weights "$work/run/last.safetensors" > "$work/eval.txt" ||
        fail "eval failed"
    grep -q "$reported" "$work/eval.txt" || fail "eval gives '$(cat "$work/eval.txt")', train said '$reported'"
    "$ember" eval --model mlp --weights "$work/run/checkpoint/state.safetensors" | grep -q "$reported" ||
        fail "eval of the checkpoint differs"
    # The run directory alone: its best weights, evaluated as the run was.
    best=$(grep -o "(best [0-9.]*%)" "$work/train.txt" | tail -1 | grep -o "[0-9.]*%")
    "$ember" eval "$work/run" > "$work/eval_dir.txt" || fail "eval RUN_DIR failed"
    grep -q "best.safetensors on cpu, Fashion-MNIST, contiguous layout: .*test accuracy $best" "$work/eval_dir.txt" ||
        fail "eval RUN_DIR gives '$(cat "$work/eval_dir.txt")', train's best was $best"
    echo "ok: run, eval reproduces $reported, eval RUN_DIR the best ($best)"
    ;;
resume)
    common=(--model mlp --limit 3000 --epochs 2 --batch-size 64 --log-every 10)
    "$ember" train "${common[@]}" --out "$work/straight" > /dev/null || fail "straight run"
    "$ember" train "${common[@]}" --out "$work/stopped" --stop-after 30 > "$work/stop.txt"
    [ $? -eq 130 ] || fail "--stop-after did not exit 130"
    grep -q "resume with: ember train --resume $work/stopped" "$work/stop.txt" || fail "no resume hint"
    "$ember" train --resume "$work/stopped" > /dev/null || fail "resume failed"
    cmp "$work/straight/last.safetensors" "$work/stopped/last.safetensors" ||
        fail "resumed weights differ from the uninterrupted run's"
    cmp "$work/straight/checkpoint/state.safetensors" "$work/stopped/checkpoint/state.safetensors" ||
        fail "resumed checkpoint differs"
    echo "ok: stop after 30 steps (mid-epoch 1) + resume == 94 straight steps, byte for byte"
    # Under loss scaling the schedule runs from device tables indexed by the
    # applied-step counts (Note [Schedule tables]): resuming is as exact.
    "$ember" train "${common[@]}" --amp f16 --out "$work/f16" > /dev/null || fail "f16 run"
    "$ember" train "${common[@]}" --amp f16 --out "$work/f16_stopped" --stop-after 30 > /dev/null
    [ $? -eq 130 ] || fail "f16: --stop-after did not exit 130"
    "$ember" train --resume "$work/f16_stopped" > /dev/null || fail "f16 resume failed"
    cmp "$work/f16/checkpoint/state.safetensors" "$work/f16_stopped/checkpoint/state.safetensors" ||
        fail "f16: resumed checkpoint differs"
    echo "ok: the same with --amp f16 (loss scaling, the schedule from device tables)"
    # The run's clock: time_s goes on across the stop and the resume.
    python3 - "$work/stopped/metrics.jsonl" <<'PY' || fail "time_s is not cumulative"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = sorted((r for r in rows if r["kind"] == "step"), key=lambda r: r["step"])
times = [r["time_s"] for r in steps]
assert len(steps) >= 8 and steps[-1]["step"] == 94, [r["step"] for r in steps]
assert all(a <= b for a, b in zip(times, times[1:])), times
PY
    # The schedule spans the run: another --epochs is refused without --extend.
    cp "$work/stopped/config.toml" "$work/stopped.toml"
    expect_error "--epochs 3 differs from the run's 2: the LR schedule spans the run" \
        "$ember" train --resume "$work/stopped" --epochs 3
    cmp -s "$work/stopped/config.toml" "$work/stopped.toml" || fail "a refused --resume rewrote config.toml"
    expect_error "--extend re-spans a resumed run's schedule: it needs --resume" \
        "$ember" train "${common[@]}" --extend --out "$work/x"
    "$ember" train --resume "$work/stopped" --epochs 3 --extend > "$work/extend.txt" ||
        fail "--extend: $(tail -3 "$work/extend.txt")"
    grep -q "schedule    re-spanned from 2 to 3 epochs (--extend): the next step's LR is .* (on the old span: " \
        "$work/extend.txt" || fail "--extend: no schedule line: $(head -9 "$work/extend.txt")"
    grep -q "^epoch 3/3" "$work/extend.txt" || fail "--extend did not train the third epoch"
    echo "ok: another --epochs needs --extend, which says how the schedule changes"
    # A kept older checkpoint never stands in for a newer one that does not
    # fit the run (here: written for 3 epochs, resumed with --epochs 2).
    keep=(--model mlp --limit 3000 --batch-size 64 --log-every 10 --save-every 5 --keep-checkpoints 3)
    "$ember" train "${keep[@]}" --epochs 2 --out "$work/keep" --stop-after 10 > /dev/null
    [ $? -eq 130 ] || fail "keep: the first 10 steps"
    "$ember" train --resume "$work/keep" --epochs 3 --extend --stop-after 15 > /dev/null
    [ $? -eq 130 ] || fail "keep: extended to 3 epochs"
    grep -qx "epochs=3" "$work/keep/config.toml" || fail "config.toml after the extension: $(grep epochs "$work/keep/config.toml")"
    cp "$work/keep/checkpoint/state.safetensors" "$work/keep.state"
    expect_error "--epochs 2 differs from the run's 3" "$ember" train --resume "$work/keep" --epochs 2
    grep -q "resuming from" "$work/err.txt" && fail "fell back to an older checkpoint: $(cat "$work/err.txt")"
    cmp -s "$work/keep/checkpoint/state.safetensors" "$work/keep.state" || fail "the checkpoint changed"
    echo "ok: a checkpoint that does not fit is refused, never replaced by an older one"
    ;;
busy)
    # Other processes spinning on half the cores: ember train and ember bench
    # leave those cores to them, and say so; --threads and OMP_NUM_THREADS win.
    n=$(nproc)
    [ "$n" -ge 2 ] || { echo "ok: one core, nothing to leave"; exit 0; }
    spinners=()
    for _ in $(seq 1 $((n / 2))); do
        ( while :; do :; done ) &
        spinners+=($!)
    done
    trap 'kill "${spinners[@]}" 2> /dev/null' EXIT
    sleep 0.3
    run=(train --model mlp --limit 640 --epochs 1 --batch-size 64)
    "$ember" "${run[@]}" --out "$work/busy" > "$work/busy.txt" || fail "busy run"
    line=$(grep "^  device      cpu" "$work/busy.txt")
    threads=$(grep -o "[0-9]* OpenMP threads" <<< "$line" | grep -o "^[0-9]*")
    grep -q "OpenMP threads ([0-9.]* of $n cores busy with other processes at the start; --threads N chooses)" \
        <<< "$line" || fail "the start table does not say why: $line"
    [ "$threads" -lt "$n" ] || fail "$threads threads on $n cores, $((n / 2)) of them busy: $line"
    "$ember" "${run[@]}" --threads "$n" --out "$work/given" > "$work/given.txt" || fail "--threads run"
    grep -q "^  device      cpu.*, $n OpenMP threads, " "$work/given.txt" ||
        fail "--threads $n: $(grep device "$work/given.txt")"
    OMP_NUM_THREADS=$n "$ember" "${run[@]}" --out "$work/env" > "$work/env.txt" || fail "env run"
    grep -q "^  device      cpu.*, $n OpenMP threads, " "$work/env.txt" ||
        fail "OMP_NUM_THREADS=$n: $(grep device "$work/env.txt")"
    "$ember" bench copy --quick --repeats 3 --warmup 0 > "$work/bench.txt" || fail "bench"
    grep -q "^# CPU load at the start: [0-9.]* of $n cores busy with other processes, so [0-9]* OpenMP thread(s)" \
        "$work/bench.txt" || fail "bench load line: $(head -2 "$work/bench.txt")"
    grep -q " spread " "$work/bench.txt" || fail "no spread column: $(head -2 "$work/bench.txt")"
    echo "ok: under load, $threads of $n threads, said in the start table; --threads and OMP_NUM_THREADS win"
    ;;
schedule)
    # Each step record shows the LR its last step trained with: a cosine run
    # starts at --lr, never rises, and its last step trains at the floor
    # (lr/100); cosine-restarts reaches the floor at each epoch's end and
    # starts the next at --lr.
    common=(--model mlp --limit 640 --epochs 2 --batch-size 64 --log-every 1 --lr 0.01)
    for s in cosine cosine-restarts; do
        "$ember" train "${common[@]}" --schedule $s --out "$work/$s" > /dev/null || fail "$s run"
    done
    python3 - "$work" <<'PY' || fail "logged LRs"
import json, math, sys
def lrs(name):
    rows = [json.loads(l) for l in open(f"{sys.argv[1]}/{name}/metrics.jsonl")]
    return [r["lr"] for r in sorted((r for r in rows if r["kind"] == "step"), key=lambda r: r["step"])]
c = lrs("cosine")
assert len(c) == 20, c
assert c[0] == 0.01, c[0]
assert all(a >= b for a, b in zip(c, c[1:])), c
assert math.isclose(c[-1], 1e-4, rel_tol=1e-12), c[-1]
for t, lr in enumerate(c):  # step t + 1 trained at lr_at(t), t_max = 19
    want = 1e-4 + (0.01 - 1e-4) * (1 + math.cos(math.pi * t / 19)) / 2
    assert math.isclose(lr, want, rel_tol=1e-12), (t, lr, want)
r = lrs("cosine-restarts")
assert r[0] == 0.01 and r[10] == 0.01, r
assert r[9] < 5e-4 and r[19] < 5e-4 and r[9] < r[8], r
print("logged LRs ok")
PY
    echo "ok: the logged LR is the one each step used; cosine ends at its floor"
    ;;
signal)
    "$ember" train --model mlp --limit 20000 --epochs 3 --out "$work/run" --log-every 5 \
        > "$work/train.txt" 2>&1 &
    pid=$!
    for _ in $(seq 1 600); do
        grep -q "step 5/" "$work/train.txt" 2> /dev/null && break
        sleep 0.1
    done
    kill -INT $pid
    wait $pid
    rc=$?
    [ $rc -eq 130 ] || fail "SIGINT: exit $rc, expected 130: $(tail -3 "$work/train.txt")"
    grep -q "interrupted after step" "$work/train.txt" || fail "no interruption message"
    [ -s "$work/run/checkpoint/state.safetensors" ] || fail "no checkpoint after SIGINT"
    "$ember" train --resume "$work/run" --epochs 1 --extend > "$work/resume.txt" || fail "resume after SIGINT"
    grep -q "done:" "$work/resume.txt" || fail "resume did not finish"
    echo "ok: SIGINT mid-epoch checkpoints and resumes"
    ;;
errors)
    # A bad flag or value: the one documented line, and exit status 2.
    "$ember" train --bogus > /dev/null 2> "$work/bad.txt"
    rc=$?
    [ $rc -eq 2 ] || fail "a bad flag exited $rc, expected 2"
    [ "$(cat "$work/bad.txt")" = "ember: error: The following argument was not expected: --bogus (--help lists the flags)" ] ||
        fail "a bad flag printed: $(cat "$work/bad.txt")"
    "$ember" train --help > /dev/null 2>&1 || fail "--help is not a success"
    # --dump-config prints the LR and weight decay in use, not empty strings.
    "$ember" train --model resnet8 --dump-config > "$work/dump.txt" || fail "--dump-config"
    grep -qx 'lr=0.01' "$work/dump.txt" || fail "resnet8's lr: $(grep '^lr' "$work/dump.txt")"
    grep -qx 'weight-decay=0.05' "$work/dump.txt" || fail "weight decay: $(grep '^weight' "$work/dump.txt")"
    "$ember" train --model mlp --optimizer sgd --dump-config | grep -qx 'lr=0.1' || fail "sgd's lr"
    "$ember" train --model mlp --lr 0.02 --dump-config | grep -qx 'lr=0.02' || fail "a given lr"
    expect_error "model" "$ember" train --model nope --out "$work/x"
    expect_error "epochs" "$ember" train --epochs 0 --out "$work/x"
    expect_error "no such run directory" "$ember" train --resume "$work/none"
    expect_error "cannot open" "$ember" train --config "$work/none.toml"
    mkfifo "$work/pipe.toml"   # refused by type, never opened (an open would block)
    expect_error "named pipe" "$ember" train --config "$work/pipe.toml"
    printf 'epochs = 1\nthis is not a line\n' > "$work/bad.toml"
    expect_error "expected key = value" "$ember" train --config "$work/bad.toml"
    expect_error "FashionMNIST: neither" "$ember" train --data-dir "$work/empty" --out "$work/y"
    [ ! -e "$work/y" ] || fail "a failed start left a run directory behind"
    touch "$work/file"
    expect_error "cannot create it" "$ember" train --out "$work/file/sub" --limit 100
    "$ember" train --limit 500 --epochs 1 --out "$work/run" > /dev/null || fail "small run"
    expect_error "already holds a run" "$ember" train --limit 500 --out "$work/run"
    head -c 1000 "$work/run/checkpoint/state.safetensors" > "$work/trunc"
    mv "$work/trunc" "$work/run/checkpoint/state.safetensors"
    expect_error "is the file truncated" "$ember" train --resume "$work/run"
    expect_error "memory-format" "$ember" train --memory-format nhwc --out "$work/x"
    # resnet8 trains channels-last on the CPU by default (auto), either on request.
    for f in contiguous channels_last; do
        "$ember" train --model resnet8 --limit 256 --epochs 1 --memory-format $f \
            --out "$work/format_$f" > "$work/format_$f.txt" || fail "resnet8 --memory-format $f"
        grep -q "$f activations" "$work/format_$f.txt" ||
            fail "resnet8 --memory-format $f: $(grep precision "$work/format_$f.txt")"
    done
    "$ember" train --model resnet8 --limit 256 --epochs 1 --out "$work/format_default" \
        > "$work/format_default.txt" || fail "resnet8's default run"
    grep -q "channels_last activations (--memory-format auto)" "$work/format_default.txt" ||
        fail "resnet8's default layout: $(grep precision "$work/format_default.txt")"
    "$ember" train --model mlp --limit 256 --epochs 1 --out "$work/format_mlp" > "$work/format_mlp.txt" ||
        fail "mlp's default run"
    grep -q "contiguous activations (--memory-format auto)" "$work/format_mlp.txt" ||
        fail "mlp's default layout: $(grep precision "$work/format_mlp.txt")"
    echo "ok: --memory-format"
    expect_error "cannot open" "$ember" eval --model mlp --weights "$work/missing.safetensors"
    expect_error "holds the weights of a mlp, not of a resnet8" "$ember" eval --model resnet8 --weights "$work/run/last.safetensors"
    expect_error "give a run directory or a weights file" "$ember" eval
    expect_error "holds no best.safetensors or last.safetensors" "$ember" eval "$work"
    # A synthetic-data run is evaluated on its own data; on another only on request.
    "$ember" train --model mlp --data synthetic --limit 1000 --epochs 1 --out "$work/syn" > /dev/null ||
        fail "synthetic run"
    mv "$work/syn/config.toml" "$work/syn/config.moved"  # the weights' metadata alone says so too
    for src in "$work/syn" "$work/syn/last.safetensors"; do
        "$ember" eval "$src" > "$work/syn.txt" || fail "eval $src"
        grep -q "synthetic" "$work/syn.txt" || fail "eval $src: $(cat "$work/syn.txt")"
        mv "$work/syn/config.moved" "$work/syn/config.toml" 2> /dev/null
    done
    # A checkpoint named from inside the run directory: its config.toml still found.
    (cd "$work/syn" && "$ember" eval checkpoint/state.safetensors) > "$work/syn.txt" || fail "eval checkpoint/..."
    grep -q "synthetic" "$work/syn.txt" || fail "eval checkpoint/ from the run directory: $(cat "$work/syn.txt")"
    expect_error "was trained on --data synthetic; evaluating it on fashion-mnist measures another task (give --other-data" \
        "$ember" eval "$work/syn" --data fashion-mnist
    ;;
finders)
    "$ember" lr-find --limit 2000 --steps 40 --out "$work/lr.svg" > "$work/lr.txt" || fail "lr-find"
    grep -qE "suggested LR: [0-9.e+-]+|no suggestion" "$work/lr.txt" || fail "lr-find printed no verdict"
    python3 -c "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])" "$work/lr.svg" ||
        fail "lr_find SVG is not well-formed"
    "$ember" max-batch --memory-budget 64 --max 256 > "$work/mb.txt" || fail "max-batch"
    grep -q "largest batch: 256 (the --max limit)" "$work/mb.txt" || fail "max-batch: $(cat "$work/mb.txt")"
    # AdamW at 3e-3 for batch 128: 256 by the square-root rule is 3e-3 x sqrt(2).
    grep -q "square-root scaled LR: 0.00424 " "$work/mb.txt" || fail "max-batch LR: $(cat "$work/mb.txt")"
    "$ember" max-batch --lr 1e-3 --memory-budget 64 --max 256 > "$work/mb.txt" || fail "max-batch --lr"
    grep -q "square-root scaled LR: 0.00141 " "$work/mb.txt" || fail "max-batch --lr: $(cat "$work/mb.txt")"
    "$ember" max-batch --optimizer sgd --memory-budget 64 --max 256 > "$work/mb.txt" || fail "max-batch sgd"
    grep -q "linearly scaled LR: 0.2 " "$work/mb.txt" || fail "max-batch sgd LR: $(cat "$work/mb.txt")"
    # Never past the training set: --limit 100 caps the batch at 100.
    "$ember" max-batch --limit 100 --memory-budget 4096 > "$work/mb.txt" || fail "max-batch --limit"
    grep -q "largest batch: 100 (the whole training set)" "$work/mb.txt" || fail "max-batch cap: $(cat "$work/mb.txt")"
    expect_error "not even a batch of 1 fits" "$ember" max-batch --memory-budget 1
    expect_error "0 < --start-lr < --end-lr" "$ember" lr-find --start-lr 1 --end-lr 0.5
    echo "ok: lr-find and max-batch"
    ;;
ddp)
    mpi=("$EMBER_MPIEXEC" --allow-run-as-root --oversubscribe -np 2)
    common=(train --ddp --limit 4000 --epochs 2 --threads 1 --workers 0 --log-every 5)
    "${mpi[@]}" "$ember" "${common[@]}" --out "$work/whole" > "$work/whole.txt" 2>&1 ||
        fail "ddp run failed: $(tail -5 "$work/whole.txt")"
    grep -q "ranks       2 (mpi), batch 128 per rank, 256 in all" "$work/whole.txt" ||
        fail "the start table lacks the ranks"
    # Only rank 0 prints: one start table and one summary in both ranks' output.
    for line in "^ember train: " "^  ranks  " "^done: "; do
        n=$(grep -c -- "$line" "$work/whole.txt")
        [ "$n" -eq 1 ] || fail "'$line' printed $n times by 2 ranks (rank 0 alone prints)"
    done
    "$ember" train --ddp --dump-config > "$work/config.txt" || fail "--dump-config failed"
    grep -qx "dist-timeout=300" "$work/config.txt" ||
        fail "--dump-config lacks the 300 s default of --dist-timeout: $(grep dist "$work/config.txt")"
    python3 - "$work/whole/metrics.jsonl" <<'PY' || fail "metrics of the ddp run"
import json, sys
epochs = [r for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "epoch"]
assert [e["world_size"] for e in epochs] == [2, 2], epochs
assert epochs[-1]["step"] == 32, epochs[-1]          # 2000 samples per rank: 16 steps an epoch
assert epochs[-1]["test_acc"] > 0.6, epochs[-1]
PY
    # Stopped mid-epoch and resumed with the same ranks: the same weights, bit for bit.
    "${mpi[@]}" "$ember" "${common[@]}" --out "$work/parts" --stop-after 20 > "$work/p1.txt" 2>&1
    [ $? -ne 0 ] || fail "--stop-after did not exit non-zero"
    "${mpi[@]}" "$ember" train --ddp --resume "$work/parts" --epochs 2 > "$work/p2.txt" 2>&1 ||
        fail "ddp resume failed: $(tail -5 "$work/p2.txt")"
    cmp -s "$work/whole/last.safetensors" "$work/parts/last.safetensors" ||
        fail "ddp: stop at step 20 and resume differs from the uninterrupted run"
    expect_error "written by 2 rank(s) and this run has 1" "$ember" train --resume "$work/parts" --epochs 3
    grep -q "resume with: mpirun -np 2 ember train --ddp --resume $work/parts" "$work/p1.txt" ||
        fail "ddp: the resume hint lacks the launch: $(grep 'resume with' "$work/p1.txt")"
    # A rank that stalls (stopped) or dies mid-run: the job ends within
    # --dist-timeout's reach, naming the rank that did not arrive, never hangs.
    for how in STOP KILL; do
        "${mpi[@]}" "$ember" "${common[@]}" --limit 64000 --epochs 50 --dist-timeout 3 \
            --out "$work/fault-$how" > "$work/fault-$how.txt" 2>&1 &
        job=$!
        for _ in $(seq 1 600); do  # the start table, then a moment of training
            grep -q "^  ranks  " "$work/fault-$how.txt" 2> /dev/null && break
            sleep 0.1
        done
        sleep 1
        victim=""
        for p in $(pgrep -f -- "--out $work/fault-$how"); do
            tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && victim=$p
        done
        [ -n "$victim" ] || fail "ddp $how: rank 1's process not found"
        start=$(date +%s)
        kill -s "$how" "$victim"
        ( sleep 60; kill -9 $job 2> /dev/null ) & watchdog=$!
        wait $job
        rc=$?
        kill $watchdog 2> /dev/null
        kill -CONT "$victim" 2> /dev/null; kill -9 "$victim" 2> /dev/null
        elapsed=$(( $(date +%s) - start ))
        [ $rc -ne 0 ] || fail "ddp $how: the job exited 0"
        [ $elapsed -lt 45 ] || fail "ddp $how: the job took $elapsed s to end"
        if [ $how = STOP ]; then
            grep -q "rank(s) 1 did not arrive" "$work/fault-$how.txt" ||
                fail "ddp STOP: rank 0 did not name rank 1: $(tail -5 "$work/fault-$how.txt")"
        else
            grep -qiE "signal 9|killed|exited on signal" "$work/fault-$how.txt" ||
                fail "ddp KILL: no word of the dead rank: $(tail -5 "$work/fault-$how.txt")"
        fi
        echo "ok: ddp rank 1 SIG$how: the job ended in $elapsed s (exit $rc)"
    done
    # A gpt over 2 ranks: windows sharded, the validation loss of the whole split.
    "${mpi[@]}" "$ember" train --ddp --model gpt --limit 256 --epochs 1 --batch-size 8 --block 32 \
        --layers 2 --embd 32 --heads 2 --threads 1 --workers 0 --out "$work/gpt" > "$work/gpt.txt" 2>&1 ||
        fail "ddp gpt run failed: $(tail -5 "$work/gpt.txt")"
    grep -q "^done: 16 steps, validation loss" "$work/gpt.txt" || fail "ddp gpt: $(tail -2 "$work/gpt.txt")"
    echo "ok: ddp run printed once, metrics, bit-exact resume, world size checked, timeout default"
    ;;
gpt)
    # A small gpt on fortunes: its files, metrics, eval, generate, resume,
    # checkpointed activations, and bad input.
    small=(--model gpt --limit 256 --epochs 2 --batch-size 16 --block 32 --layers 2 --embd 32
           --heads 2 --log-every 4)
    "$ember" train "${small[@]}" --out "$work/run" > "$work/train.txt" ||
        fail "gpt train failed: $(tail -5 "$work/train.txt")"
    for f in config.toml metrics.jsonl last.safetensors best.safetensors curves.svg tokenizer.json \
             checkpoint/state.safetensors; do
        [ -s "$work/run/$f" ] || fail "gpt: missing $f"
    done
    grep -q "data        fortunes (char tokenizer, [0-9]* tokens" "$work/train.txt" ||
        fail "gpt: start table: $(grep data "$work/train.txt")"
    python3 - "$work/run/metrics.jsonl" "$work/run/tokenizer.json" <<'PY' || fail "gpt metrics.jsonl"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
epochs = [r for r in rows if r["kind"] == "epoch"]
assert len(epochs) == 2, epochs
last = epochs[-1]
assert "test_acc" not in last, last
assert abs(last["test_perplexity"] - math.exp(last["test_loss"])) < 1e-6 * last["test_perplexity"]
assert abs(last["test_bits_per_token"] * math.log(2) - last["test_loss"]) < 1e-9
assert last["test_loss"] < epochs[0]["test_loss"] < math.log(113), epochs
tok = json.load(open(sys.argv[2]))
assert tok["kind"] == "char" and "\n" in tok["vocab"] and tok["vocab"] == sorted(tok["vocab"]), tok
print("gpt metrics ok: validation loss", [round(e["test_loss"], 4) for e in epochs])
PY
    python3 -c "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])" "$work/run/curves.svg" ||
        fail "gpt curves.svg is not well-formed XML"
    best=$(grep -o "best [0-9.]*)" "$work/train.txt" | tail -1 | grep -o "[0-9.]*")
    "$ember" eval --weights "$work/run/best.safetensors" > "$work/eval.txt" || fail "gpt eval"
    grep -q "validation loss $best " "$work/eval.txt" ||
        fail "gpt eval gives '$(cat "$work/eval.txt")', train's best was $best"
    # Generation: the same seed, the same text; nothing a terminal would act on.
    "$ember" generate "$work/run" --tokens 300 --seed 7 > "$work/gen1.txt" 2> "$work/gen1.err" ||
        fail "generate: $(cat "$work/gen1.err")"
    "$ember" generate "$work/run" --tokens 300 --seed 7 > "$work/gen2.txt" 2> /dev/null
    cmp -s "$work/gen1.txt" "$work/gen2.txt" || fail "generate: the same seed gave another text"
    "$ember" generate "$work/run" --tokens 300 --seed 8 > "$work/gen3.txt" 2> /dev/null
    cmp -s "$work/gen1.txt" "$work/gen3.txt" && fail "generate: another seed gave the same text"
    grep -q "tokens/s" "$work/gen1.err" || fail "generate printed no tokens/s: $(cat "$work/gen1.err")"
    LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$work/gen1.txt" && fail "generate wrote a control character"
    "$ember" generate --weights "$work/run/last.safetensors" --prompt "The " --tokens 20 \
        --temperature 0 > "$work/greedy.txt" 2> /dev/null || fail "generate --weights --temperature 0"
    grep -q "^The " "$work/greedy.txt" || fail "generate does not echo the prompt: $(cat "$work/greedy.txt")"
    echo "ok: gpt run, metrics, eval reproduces $best, generate"
    # Stopped and resumed: byte-identical; activations recomputed: the same weights.
    "$ember" train "${small[@]}" --out "$work/stopped" --stop-after 11 > /dev/null
    [ $? -eq 130 ] || fail "gpt: --stop-after did not exit 130"
    "$ember" train --resume "$work/stopped" > /dev/null || fail "gpt resume"
    cmp "$work/run/last.safetensors" "$work/stopped/last.safetensors" ||
        fail "gpt: resumed weights differ from the uninterrupted run's"
    "$ember" train "${small[@]}" --checkpoint-activations --out "$work/ckpt" > /dev/null ||
        fail "gpt --checkpoint-activations"
    cmp "$work/run/last.safetensors" "$work/ckpt/last.safetensors" ||
        fail "gpt: --checkpoint-activations changed the weights"
    echo "ok: gpt resume and checkpointed activations, byte for byte"
    "$ember" train "${small[@]}" --amp bf16 --epochs 1 --out "$work/bf16" > /dev/null || fail "gpt --amp bf16"
    "$ember" lr-find --model gpt --steps 5 --limit 64 --out "$work/lr.svg" > /dev/null || fail "gpt lr-find"
    "$ember" max-batch --model gpt --memory-budget 64 --max 8 > "$work/mb.txt" || fail "gpt max-batch"
    grep -q "largest batch:" "$work/mb.txt" || fail "gpt max-batch: $(cat "$work/mb.txt")"
    # A text of one's own: a file; bad files are one line naming the file and offset.
    for i in $(seq 1 40); do echo "line $i of a small text, repeated to make a corpus"; done > "$work/mine.txt"
    "$ember" train "${small[@]}" --epochs 1 --data "$work/mine.txt" --out "$work/mine" > "$work/mine.out" ||
        fail "gpt --data FILE: $(tail -3 "$work/mine.out")"
    grep -q "data        $work/mine.txt (char tokenizer" "$work/mine.out" || fail "gpt --data FILE: start table"
    printf 'ok text\n\xff\xfe binary\n' > "$work/bad.txt"
    for i in $(seq 1 60); do echo "more text, line $i" >> "$work/bad.txt"; done
    expect_error "bad.txt: byte offset 8: invalid UTF-8" "$ember" train "${small[@]}" --data "$work/bad.txt" --out "$work/x"
    "$ember" train "${small[@]}" --epochs 1 --data "$work/bad.txt" --tokenizer byte --out "$work/bytes" > /dev/null ||
        fail "gpt --tokenizer byte on a non-UTF-8 file"
    expect_error "no such file or directory" "$ember" train --model gpt --data "$work/none.txt" --out "$work/x"
    expect_error "fewer than one window" "$ember" train "${small[@]}" --data "$work/mine.txt" --block 512 --out "$work/x"
    expect_error "not in the tokenizer's vocabulary" "$ember" generate "$work/run" --prompt $'\u03a9'
    "$ember" train --model mlp --limit 500 --epochs 1 --out "$work/mlp" > /dev/null || fail "mlp run"
    expect_error "not the weights of a gpt" "$ember" generate --weights "$work/mlp/last.safetensors"
    expect_error "generate: give a run directory or --weights" "$ember" generate
    expect_error "tokenizer" "$ember" train --model gpt --tokenizer word --out "$work/x"
    [ ! -e "$work/x" ] || fail "a failed gpt start left a run directory behind"
    ;;
diverge)
    # --lr 1e6: the loss is NaN within a few steps. The default policy stops
    # at the first log read (step 10 here), exits 3 naming the step and the
    # LR, and writes no weights or checkpoint of the diverged state.
    common=(--model mlp --limit 2560 --epochs 2 --batch-size 64 --log-every 10)
    "$ember" train "${common[@]}" --lr 1e6 --out "$work/stop" > "$work/stop.txt" 2> "$work/stop.err"
    rc=$?
    [ $rc -eq 3 ] || fail "diverged run exited $rc, expected 3: $(tail -3 "$work/stop.err")"
    grep -q "ember train: training diverged at step [0-9]*: the loss is not finite (loss nan.*lr " "$work/stop.err" ||
        fail "divergence message: $(cat "$work/stop.err")"
    step=$(grep -o "diverged at step [0-9]*" "$work/stop.err" | grep -o "[0-9]*$")
    [ "$step" -ge 1 ] && [ "$step" -le 10 ] || fail "diverged at step $step, not within the first log interval"
    grep -q "first non-finite parameter: " "$work/stop.err" || fail "no parameter named: $(cat "$work/stop.err")"
    [ ! -e "$work/stop/best.safetensors" ] && [ ! -e "$work/stop/last.safetensors" ] ||
        fail "a diverged first epoch left weights behind"
    [ ! -e "$work/stop/checkpoint" ] || fail "a diverged run wrote a checkpoint"
    grep -q '"kind":"diverged"' "$work/stop/metrics.jsonl" || fail "no diverged record in metrics.jsonl"
    grep -q "^done:" "$work/stop.txt" && fail "a diverged run printed done:"
    echo "ok: --lr 1e6 stops at step $step with exit 3"
    # After a finite epoch: best.safetensors and the checkpoint stay that epoch's
    # (an epoch at a sane LR, then resumed at 1e6 for the second).
    "$ember" train "${common[@]}" --epochs 1 --out "$work/kept" > /dev/null || fail "first epoch"
    cp "$work/kept/best.safetensors" "$work/best.before"
    cp "$work/kept/checkpoint/state.safetensors" "$work/state.before" || fail "no checkpoint"
    cp "$work/kept/config.toml" "$work/config.before"
    "$ember" train --resume "$work/kept" --epochs 2 --extend --lr 1e6 > "$work/kept.txt" 2> "$work/kept.err"
    [ $? -eq 3 ] || fail "resumed run at lr 1e6 did not stop with exit 3: $(tail -3 "$work/kept.err")"
    cmp -s "$work/kept/best.safetensors" "$work/best.before" || fail "best.safetensors changed"
    cmp -s "$work/kept/checkpoint/state.safetensors" "$work/state.before" || fail "checkpoint changed"
    # --extend records the new length with its first checkpoint: none was written.
    cmp -s "$work/kept/config.toml" "$work/config.before" || fail "config.toml changed without a checkpoint"
    echo "ok: best.safetensors and the checkpoint are kept"
    # skip: non-finite gradients skip their steps; too many in a row stop the run.
    "$ember" train "${common[@]}" --lr 1e6 --on-nonfinite skip --max-skips 5 --out "$work/skip" \
        > "$work/skip.txt" 2> "$work/skip.err"
    [ $? -eq 3 ] || fail "skip: expected exit 3: $(tail -3 "$work/skip.err")"
    grep -q "steps in a row had a non-finite gradient norm and were skipped (--max-skips 5)" "$work/skip.err" ||
        fail "skip message: $(cat "$work/skip.err")"
    echo "ok: --on-nonfinite skip stops after --max-skips"
    # continue: the old behaviour, to the end.
    "$ember" train "${common[@]}" --epochs 1 --lr 1e6 --on-nonfinite continue --out "$work/cont" \
        > "$work/cont.txt" 2>&1 || fail "continue: $(tail -3 "$work/cont.txt")"
    grep -q "^done:" "$work/cont.txt" || fail "continue did not finish"
    expect_error "--on-nonfinite" "$ember" train --on-nonfinite maybe --out "$work/x"
    ;;
profile)
    # --profile 3:7: the 4 steps after the 3rd, into RUN_DIR/trace.json, and
    # the summary; a window past the run's end is cut short, not an error.
    "$ember" train --model mlp --limit 1280 --epochs 1 --batch-size 64 --log-every 5 \
        --profile 3:7 --out "$work/run" > "$work/train.txt" || fail "train --profile: $(tail -3 "$work/train.txt")"
    [ -s "$work/run/trace.json" ] || fail "no trace.json"
    grep -q "^profile of ember train --model mlp: 4 steps (step 4 to step 7), " "$work/train.txt" ||
        fail "summary header: $(cat "$work/train.txt")"
    grep -q "^limits on cpu, measured as ember bench does: f32 GEMM [0-9.]* GFLOP/s, copy [0-9.]* GB/s" \
        "$work/train.txt" || fail "no limits line"
    grep -q "^(outside every op and range)" "$work/train.txt" || fail "no outside row"
    # The trace's structure, as Perfetto and chrome://tracing read it, and the
    # summary's step time and rows against the trace's own numbers.
    python3 - "$work/run/trace.json" "$work/train.txt" <<'PY' || fail "trace.json"
import json, re, sys
doc = json.load(open(sys.argv[1]))
summary = open(sys.argv[2]).read()
ev = doc["traceEvents"]
assert isinstance(ev, list) and ev
for e in ev:
    assert e["ph"] in ("X", "C", "M"), e
    assert isinstance(e["pid"], int)
meta = [e for e in ev if e["ph"] == "M"]
assert {m["name"] for m in meta} <= {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}
named = {m["tid"] for m in meta if m["name"] == "thread_name"}
xs = [e for e in ev if e["ph"] == "X"]
for x in xs:
    assert isinstance(x["name"], str) and isinstance(x["cat"], str)
    assert isinstance(x["ts"], (int, float)) and isinstance(x["dur"], (int, float)) and x["dur"] >= 0
    assert x["tid"] in named, x
    if x["cat"] == "op":
        assert x["args"]["device"] == "cpu" and x["args"]["bytes"] > 0, x
        assert x["args"].get("shapes") or x["name"].endswith("_update"), x  # multi-tensor updates list none
for c in (e for e in ev if e["ph"] == "C"):
    assert c["args"] and all(isinstance(v, (int, float)) for v in c["args"].values()), c
# Spans on one thread nest: none starts inside another and ends after it.
spans = sorted(((x["ts"], -x["dur"], x) for x in xs if x["tid"] == 1), key=lambda t: (t[0], t[1]))
stack = []
for ts, negdur, x in spans:
    end = ts - negdur
    while stack and stack[-1] <= ts:
        stack.pop()
    assert not stack or end <= stack[-1] + 1e-3, ("overlap", x)
    stack.append(end)
steps = [x for x in xs if x["cat"] == "step"]
assert [s["name"] for s in steps] == ["step 4", "step 5", "step 6", "step 7"], steps
cats = {x["cat"] for x in xs}
assert {"op", "backward", "optimizer", "loader", "step"} <= cats, cats
# The summary's ms per step is the steps' mean duration.
mean_ms = sum(s["dur"] for s in steps) / len(steps) / 1e3
said = float(re.search(r", ([0-9.]+) ms per step", summary).group(1))
assert abs(said - mean_ms) <= 0.0005 + 1e-9, (said, mean_ms)
# Its shares add up to the step: ops + ranges' own time + outside = 100 %.
m = re.search(r"ops ([0-9.]+) % of the step, named ranges' own time ([0-9.]+) %, outside both ([0-9.]+) %", summary)
assert m and abs(sum(float(g) for g in m.groups()) - 100) <= 0.2, m and m.groups()
# Every op inside the steps: their time is the ops' share.
def inside(x, s): return x["ts"] >= s["ts"] and x["ts"] + x["dur"] <= s["ts"] + s["dur"] + 1e-3
op_us = sum(x["dur"] for x in xs if x["cat"] == "op" and any(inside(x, s) for s in steps))
share = 100 * op_us / sum(s["dur"] for s in steps)
assert abs(share - float(m.group(1))) <= 0.1, (share, m.group(1))
print("trace ok: %d events, ops %.1f %% of the step" % (len(ev), share))
PY
    "$ember" profile "$work/run" > "$work/again.txt" || fail "ember profile RUN_DIR"
    sed -n '/^profile of/,/^memory/p' "$work/train.txt" > "$work/first.txt"
    cmp -s "$work/first.txt" "$work/again.txt" || fail "ember profile differs: $(diff "$work/first.txt" "$work/again.txt")"
    "$ember" profile "$work/run/trace.json" --by-shape --top 3 > "$work/shape.txt" || fail "ember profile FILE"
    grep -q "^(.* more rows)" "$work/shape.txt" || fail "--top 3 shows no summed row"
    grep -q "f32 \[" "$work/shape.txt" || fail "--by-shape shows no signature"
    echo "ok: --profile writes a trace and a summary; ember profile prints it again"
    # A window past the end: what was recorded (2 steps of 20).
    "$ember" train --model mlp --limit 1280 --epochs 1 --batch-size 64 --profile 18:30 \
        --out "$work/short" > "$work/short.txt" || fail "train --profile past the end"
    grep -q "^profile of ember train --model mlp: 2 steps (step 19 to step 20)" "$work/short.txt" ||
        fail "short window: $(grep profile "$work/short.txt")"
    expect_error "--profile: '20' is not A:B" "$ember" train --profile 20 --out "$work/x"
    expect_error "the window is empty" "$ember" train --profile 5:5 --out "$work/x"
    expect_error "is not A:B" "$ember" train --profile=-1:4 --out "$work/x"
    expect_error "at most 10000" "$ember" train --profile 0:20000 --out "$work/x"
    expect_error "cannot open" "$ember" profile "$work/nothing"
    echo '{"traceEvents": 3}' > "$work/bad.json"
    expect_error "no 'traceEvents' array" "$ember" profile "$work/bad.json"
    ;;
diff)
    # ember diff: a resumed run against an uninterrupted one is identical; a
    # seed changed from step 0 parts at step 1; an LR changed at a resume
    # after step 12 parts at step 13 (losses logged every step, parameters
    # fingerprinted every step). Exit codes with --exit-code; weight files.
    common=(--model mlp --limit 1280 --epochs 2 --batch-size 64 --log-every 1 --fingerprint-every 1)
    "$ember" train "${common[@]}" --out "$work/a" > /dev/null || fail "run a"
    "$ember" train "${common[@]}" --out "$work/resumed" --stop-after 12 > /dev/null
    [ $? -eq 130 ] || fail "--stop-after 12"
    "$ember" train --resume "$work/resumed" > /dev/null || fail "resume"
    "$ember" diff "$work/a" "$work/resumed" --exit-code > "$work/same.txt" || fail "resumed differs: $(cat "$work/same.txt")"
    grep -q "^configuration: the same" "$work/same.txt" || fail "config: $(cat "$work/same.txt")"
    grep -q "^losses: 40 step records compared (steps 1 to 40)" "$work/same.txt" || fail "losses: $(cat "$work/same.txt")"
    grep -q "^parameter fingerprints: 40 compared, bitwise equal in every one" "$work/same.txt" ||
        fail "fingerprints: $(cat "$work/same.txt")"
    grep -q "^identical: " "$work/same.txt" || fail "not identical: $(cat "$work/same.txt")"
    echo "ok: a resumed run is identical to an uninterrupted one"
    "$ember" train "${common[@]}" --seed 1 --out "$work/seed" > /dev/null || fail "run seed 1"
    "$ember" diff "$work/a" "$work/seed" --exit-code > "$work/seed.txt"
    [ $? -eq 1 ] || fail "--exit-code of different runs is not 1"
    grep -q "^  seed  *A: 0  *B: 1$" "$work/seed.txt" || fail "seed not named: $(cat "$work/seed.txt")"
    grep -q "^  first bitwise difference: step 1: " "$work/seed.txt" || fail "seed: $(cat "$work/seed.txt")"
    grep -q "the first that differs: step 1: " "$work/seed.txt" || fail "seed fingerprints: $(cat "$work/seed.txt")"
    grep -q "^different: the runs part by step 1$" "$work/seed.txt" || fail "seed verdict: $(cat "$work/seed.txt")"
    echo "ok: another seed parts at step 1"
    "$ember" train "${common[@]}" --out "$work/lr" --stop-after 12 > /dev/null
    "$ember" train --resume "$work/lr" --lr 0.001 > /dev/null || fail "resume with --lr"
    "$ember" diff "$work/a" "$work/lr" > "$work/lr.txt" || fail "diff lr"
    grep -q "^  lr  *A: 0.003  *B: 0.001$" "$work/lr.txt" || fail "lr not named: $(cat "$work/lr.txt")"
    # Step 13's loss comes before its update, the first with the new LR: the
    # losses part at 14, the parameters after 13's update.
    grep -q "^  first bitwise difference: step 14: " "$work/lr.txt" || fail "lr: $(cat "$work/lr.txt")"
    grep -q "the first that differs: step 13: " "$work/lr.txt" || fail "lr fingerprints: $(cat "$work/lr.txt")"
    grep -q "^different: the runs part by step 13$" "$work/lr.txt" || fail "lr verdict: $(cat "$work/lr.txt")"
    echo "ok: an LR changed at a resume after step 12 parts at step 13"
    # The exact loss field is the loss's bits.
    python3 - "$work/a/metrics.jsonl" <<'PY' || fail "loss_hex"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rows if r["kind"] == "step"]
assert steps and all(float.fromhex(r["loss_hex"]) == r["loss"] for r in steps)
assert all(r["from_step"] == r["step"] for r in steps)  # --log-every 1
prints = [r for r in rows if r["kind"] == "fingerprint"]
assert [r["step"] for r in prints] == list(range(1, 41)) and all(float.fromhex(r["params_hex"]) == r["params"] for r in prints)
print("metrics ok")
PY
    # Two weight files.
    "$ember" diff "$work/a/last.safetensors" "$work/resumed/last.safetensors" --exit-code |
        grep -q "identical: all 6 tensors bitwise equal" || fail "weights identical"
    "$ember" diff "$work/a/last.safetensors" "$work/seed/best.safetensors" > "$work/w.txt"
    grep -q "6 of 6 tensors differ, the worst first" "$work/w.txt" || fail "weights: $(cat "$work/w.txt")"
    grep -q "^  1.weight  *f32 \[512, 784\] " "$work/w.txt" || fail "weights rows: $(cat "$work/w.txt")"
    expect_error "not one of each" "$ember" diff "$work/a" "$work/a/last.safetensors"
    head -c 100 "$work/a/last.safetensors" > "$work/cut.safetensors"
    expect_error "cut.safetensors" "$ember" diff "$work/a/last.safetensors" "$work/cut.safetensors"
    expect_error "none.safetensors' does not exist" "$ember" diff "$work/a/last.safetensors" "$work/none.safetensors"
    ;;
doctor)
    # ember doctor on a short configuration: the announced plan, the table
    # (the reference first, each runnable trial with a verdict), the trials
    # that do not apply with their reasons, the findings, the command line
    # and doctor.json; bad input is one error line.
    "$ember" doctor --model mlp --limit 2048 --batch-size 64 --steps 3 --rounds 2 --warmup-steps 1 \
        --json "$work/doctor.json" > "$work/doctor.txt" || fail "doctor: $(tail -5 "$work/doctor.txt")"
    grep -q "^ember doctor: mlp on cpu, batch 64, [0-9]* OpenMP threads; [0-9]* trials x 2 rounds of 3 steps after 1 warm-up steps; about [0-9]* s" \
        "$work/doctor.txt" || fail "plan line: $(head -2 "$work/doctor.txt")"
    grep -q "^-    the current settings  .*1.00x .*(the reference)$" "$work/doctor.txt" || fail "reference row"
    grep -q "^#5   --amp bf16  .*x .*MB  \(faster\|slower\|within noise\)$" "$work/doctor.txt" || fail "amp row"
    grep -q "^#4   --batch-size 512 --lr " "$work/doctor.txt" || fail "larger batch row (8 x 64)"
    grep -q "^  #7   --deterministic: n/a on cpu: no cuDNN$" "$work/doctor.txt" || fail "n/a line"
    grep -q "^  #12  ok   no convolution with a bias feeds a batch norm$" "$work/doctor.txt" || fail "#12 finding"
    grep -q "^  #21  ok   inputs: mean " "$work/doctor.txt" || fail "#21 finding"
    grep -q "^  ember train --model mlp .*--limit 2048" "$work/doctor.txt" || fail "command line: $(tail -3 "$work/doctor.txt")"
    python3 - "$work/doctor.json" "$work/doctor.txt" <<'PY' || fail "doctor.json"
import json, sys
d = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
assert d["model"] == "mlp" and d["device"] == "cpu" and d["rounds"] == 2 and d["steps"] == 3
ran = [t for t in d["trials"] if "samples_per_s" in t]
assert ran[0]["trial"] == "the current settings" and ran[0]["ratio"] == 1.0
for t in ran:
    s = t["samples_per_s"]
    assert len(s["rounds"]) == 2 and s["min"] <= s["median"] <= s["max"] and s["min"] > 0, t
    assert t["verdict"] in ("(the reference)", "faster", "slower", "within noise"), t
    # The verdict follows the rule: faster only when its slowest round beats
    # the reference's fastest, slower only when its fastest is behind its
    # slowest, and either only for a median 3 % or more away.
    if t is not ran[0]:
        ref = ran[0]["samples_per_s"]
        r = s["median"] / ref["median"]
        want = ("faster" if s["min"] > ref["max"] and r >= 1.03 else
                "slower" if s["max"] < ref["min"] and r <= 0.97 else "within noise")
        assert t["verdict"] == want, (t, ref)
assert all(t.get("not_applicable") for t in d["trials"] if "samples_per_s" not in t and "result" not in t)
assert d["command"] in text and d["command"].startswith("ember train --model mlp")
assert {f["tip"] for f in d["findings"]} >= {8, 12, 14, 21}
print("doctor.json ok:", len(ran), "trials measured")
PY
    expect_error "drop --ddp" "$ember" doctor --ddp --json "$work/x.json"
    expect_error "--rounds" "$ember" doctor --rounds 0
    expect_error "--model" "$ember" doctor --model nothing
    ;;
*) fail "unknown case $case_name" ;;
esac
