#!/usr/bin/env bash
# One run on a machine with an NVIDIA GPU: build the CUDA backend for sm_90,
# run the CUDA tests (CUDA against the CPU backend), the GPU benchmarks and
# their PyTorch peer (tools/device/torch_peer.py; the fused attention beside
# PyTorch's flash SDPA), `ember train --device
# cuda` end to end on synthetic data (no dataset needed), the reference
# models' training steps beside PyTorch's on the same GPU
# (bench/compare_pytorch.py step --device cuda: f32, and bf16 autocast;
# mlp, resnet8 and the gpt), a
# profiled resnet8 (trace.json) and `ember doctor` on the GPU, and print a
# short table last. Expects .deps from tools/device/prepare.sh when
# the Debian packages are missing. Results go to $OUT (or ./device-out).
# Budget: under 10 minutes on one H200, most of it the build.
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-device-out}"
mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH"
prefix=()
[ -d .deps/usr ] && prefix=(-DCMAKE_PREFIX_PATH="$PWD/.deps/usr")
# cuDNN from PyTorch's wheel when the toolkit has none (optional for now).
if [ -z "${CUDNN_ROOT:-}" ]; then
    CUDNN_ROOT=$(python3 -c 'import nvidia.cudnn as m; print(m.__path__[0])' 2>/dev/null || true)
    export CUDNN_ROOT
fi
[ -n "$CUDNN_ROOT" ] && export LD_LIBRARY_PATH="$CUDNN_ROOT/lib:${LD_LIBRARY_PATH:-}"
# NCCL likewise.
if [ -z "${NCCL_ROOT:-}" ]; then
    NCCL_ROOT=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])' 2>/dev/null || true)
    export NCCL_ROOT
fi
[ -n "$NCCL_ROOT" ] && export LD_LIBRARY_PATH="$NCCL_ROOT/lib:${LD_LIBRARY_PATH:-}"
generator=Ninja
command -v ninja > /dev/null || generator="Unix Makefiles"
start=$(date +%s)
cmake -S . -B build/device -G "$generator" -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 "${prefix[@]}" > "$out/configure.txt" 2>&1 \
    || { tail -30 "$out/configure.txt"; exit 1; }
cmake --build build/device -j "$(nproc)" --target test_cuda ember_cli > "$out/build.txt" 2>&1 \
    || { grep -E 'error|FAILED' "$out/build.txt" | head -30; exit 1; }
built=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1
build/device/tools/ember info | tee "$out/info.txt"
timeout 300 build/device/tests/test_cuda > "$out/test_cuda.txt" 2>&1
tests_rc=$?
timeout 300 build/device/tools/ember bench copy elementwise reduce softmax nn matmul conv --json \
    > "$out/bench.json" \
    2> "$out/bench_err.txt"
bench_rc=$?
peer_rc=1
if [ $bench_rc -eq 0 ]; then
    timeout 120 python3 tools/device/torch_peer.py "$out/bench.json" > "$out/peer.txt" 2>&1
    peer_rc=$?
fi
# The fused attention's rows (bf16, B·H = 16·16, T 512..8192, D 64 and 128,
# decode) beside PyTorch's flash SDPA on the same shapes.
timeout 240 build/device/tools/ember bench attention --device cuda --json > "$out/attention.json" \
    2> "$out/attention_err.txt"
attn_rc=$?
[ $attn_rc -eq 0 ] && timeout 180 python3 tools/device/torch_peer.py "$out/attention.json" \
    > "$out/attention_peer.txt" 2>&1
# ember train on the GPU end to end (mlp, resnet8, and resnet8 on
# channels-last batches): loader batches on the device, metrics,
# evaluation, checkpoint; each step record must show exactly one host sync
# (its read of the summed loss, docs/train.md "On a GPU").
# Their logs go to build/device/check and, gathered, to $out/models.txt.
work=build/device/check
rm -rf "$work"
mkdir -p "$work"
train_rc=0
for run in mlp resnet8 resnet8-cl; do
    model=${run%-cl}
    format=contiguous
    [ "$run" = resnet8-cl ] && format=channels_last
    timeout 60 build/device/tools/ember train --model "$model" --data synthetic --device cuda \
        --epochs 1 --limit 6400 --log-every 10 --workers 4 --memory-format "$format" \
        --out "$work/run-$run" > "$work/train_$run.txt" 2>&1 \
    && python3 - "$work/run-$run/metrics.jsonl" >> "$work/train_$run.txt" 2>&1 <<'PY' \
    || train_rc=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
steps = [r for r in rows if r["kind"] == "step"]
epochs = [r for r in rows if r["kind"] == "epoch"]
assert len(steps) == 5 and len(epochs) == 1, rows
bad = [r for r in steps if r["host_syncs"] != 1]
assert not bad, f"step records with host_syncs != 1: {bad}"
print(f"metrics ok: {steps[-1]['samples_per_s']:.0f} samples/s, test accuracy {epochs[0]['test_acc']:.3f}")
PY
done
# A gpt on the GPU (the fused attention; f32: a warp per row) on the docs/
# folder as its text (the machine has no fortunes package), then sampled.
timeout 180 build/device/tools/ember train --model gpt --data docs --device cuda --epochs 1 \
    --limit 4096 --log-every 16 --workers 2 --out "$work/run-gpt" > "$work/train_gpt.txt" 2>&1 \
&& python3 - "$work/run-gpt/metrics.jsonl" >> "$work/train_gpt.txt" 2>&1 <<'PY' \
&& timeout 60 build/device/tools/ember generate "$work/run-gpt" --tokens 200 >> "$work/train_gpt.txt" 2>&1 \
|| train_rc=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
steps = [r for r in rows if r["kind"] == "step"]
epochs = [r for r in rows if r["kind"] == "epoch"]
assert len(steps) == 8 and len(epochs) == 1, rows
bad = [r for r in steps if r["host_syncs"] != 1]
assert not bad, f"step records with host_syncs != 1: {bad}"
print(f"metrics ok: {steps[-1]['samples_per_s']:.0f} windows/s, validation loss {epochs[0]['test_loss']:.3f}")
PY
# Training steps beside PyTorch's on the same GPU (ember train's loop on
# synthetic data against PyTorch eager on a batch already on the GPU).
steps_rc=0
for model in mlp resnet8; do
    for amp in off bf16; do
        timeout 90 python3 bench/compare_pytorch.py step --device cuda --model "$model" --amp "$amp" \
            --no-compile --rounds 3 --ember build/device/tools/ember --json \
            > "$work/steps_${model}_$amp.json" 2> "$work/steps_${model}_$amp.err" || steps_rc=1
    done
done
for amp in off bf16; do  # the gpt's step (fused attention) beside PyTorch eager's
    timeout 120 python3 bench/compare_pytorch.py step --device cuda --model gpt --amp "$amp" \
        --data-dir docs --no-compile --rounds 3 --repeats 20 --ember build/device/tools/ember --json \
        > "$work/steps_gpt_$amp.json" 2> "$work/steps_gpt_$amp.err" || steps_rc=1
done
# The profiler and the doctor on the GPU (docs/profiling.md, docs/doctor.md):
# a trace with the CUDA stream's kernel times, and the GPU's trials.
prof_rc=0
timeout 60 build/device/tools/ember train --model resnet8 --data synthetic --device cuda --epochs 1 \
    --limit 2560 --profile 10:20 --out "$work/run-prof" > "$work/train_profile.txt" 2>&1 || prof_rc=1
cp "$work/run-prof/trace.json" "$out/trace.json" 2>/dev/null
timeout 150 build/device/tools/ember doctor --model resnet8 --data synthetic --device cuda --rounds 2 \
    --steps 20 --json "$out/doctor.json" > "$work/train_doctor.txt" 2>&1 || prof_rc=1
for f in "$work"/train_*.txt "$work"/steps_*; do echo "==> $f"; cat "$f"; done > "$out/models.txt"
echo
echo "== CUDA rows against PyTorch (ember ms / torch ms; below 1 is faster)"
cat "$out/peer.txt" 2>/dev/null | head -70
echo
echo "== fused attention against PyTorch's flash SDPA (ember ms / torch ms; below 1 is faster)"
grep -E '^attention' "$out/attention_peer.txt" 2>/dev/null | head -50
echo
echo "== training steps against PyTorch on the same GPU (ms per step; x: PyTorch ms / ember ms, > 1: ember faster)"
python3 - "$work" <<'PY'
import json, os, sys
print(f"{'model':9}{'precision':10}{'ember':>9}{'eager':>9}{'ch_last':>9}{'x eager':>9}{'x best':>8}{'data wait':>11}")
for model in ("mlp", "resnet8", "gpt"):
    for amp in ("off", "bf16"):
        path = os.path.join(sys.argv[1], f"steps_{model}_{amp}.json")
        try:
            r = json.load(open(path))
        except (OSError, ValueError):
            err = open(path[:-5] + ".err").read().strip().splitlines() if os.path.exists(path[:-5] + ".err") else []
            print(f"{model:9}{'f32' if amp == 'off' else amp:10}  failed: {(err or ['no output'])[-1][:90]}")
            continue
        m = r["median_ms"]
        cell = lambda k: f"{m[k]:9.3f}" if k in m else f"{'-':>9}"
        print(f"{model:9}{'f32' if amp == 'off' else amp:10}{cell('ember')}{cell('eager')}{cell('channels_last')}"
              f"{r['pytorch_eager_over_ember_time']:9.2f}{r['pytorch_over_ember_time']:8.2f}"
              f"{100 * (r['ember_data_wait'] or 0):10.1f}%")
PY
echo
echo "== summary (build $((built - start)) s)"
echo "configure:  $(grep -E 'ember: cuDNN' "$out/configure.txt" | head -1)"
echo "            $(grep -E 'ember: NCCL' "$out/configure.txt" | head -1)"
echo "gpu:        $(tail -1 "$out/gpu.txt")"
echo "test_cuda:  rc=$tests_rc  $(grep -E 'test cases|All tests passed' "$out/test_cuda.txt" | tail -1)"
echo "bench:      rc=$bench_rc  ($(grep -c '"family"' "$out/bench.json") rows in bench.json)"
echo "torch peer: rc=$peer_rc"
echo "attention:  rc=$attn_rc  ($(grep -c '"family"' "$out/attention.json" 2>/dev/null) rows)"
echo "train:      rc=$train_rc  $(grep -h 'metrics ok' "$work"/train_*.txt | tr '\n' ' ')"
echo "vs torch:   rc=$steps_rc  (models.txt)"
echo "profile:    rc=$prof_rc  $(grep -h '^ops \|^on the GPU' "$work/train_profile.txt" | tr '\n' ' ')"
echo "doctor:     $(grep -h 'the doctor took' "$work/train_doctor.txt")"
[ $tests_rc -ne 0 ] && grep -B3 -A12 'FAILED' "$out/test_cuda.txt" | head -60
[ $bench_rc -ne 0 ] && tail -5 "$out/bench_err.txt"
[ $attn_rc -ne 0 ] && tail -5 "$out/attention_err.txt"
[ $train_rc -ne 0 ] && tail -n 8 "$work"/train_*.txt
exit $tests_rc
