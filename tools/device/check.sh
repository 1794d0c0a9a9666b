#!/usr/bin/env bash
# One run on a machine with an NVIDIA GPU: build the CUDA backend for sm_90,
# run the CUDA tests (CUDA against the CPU backend), the GPU benchmarks and
# their PyTorch peer (tools/device/torch_peer.py), and print a short table
# last. Expects .deps from tools/device/prepare.sh when the Debian packages
# are missing. Results go to $OUT (or ./device-out).
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
timeout 300 build/device/tools/ember bench copy elementwise reduce softmax nn --json > "$out/bench.json" \
    2> "$out/bench_err.txt"
bench_rc=$?
peer_rc=1
if [ $bench_rc -eq 0 ]; then
    timeout 120 python3 tools/device/torch_peer.py "$out/bench.json" > "$out/peer.txt" 2>&1
    peer_rc=$?
fi
echo
echo "== CUDA rows against PyTorch (ember ms / torch ms; below 1 is faster)"
cat "$out/peer.txt" 2>/dev/null | head -70
echo
echo "== summary (build $((built - start)) s)"
echo "configure:  $(grep -E 'ember: cuDNN' "$out/configure.txt" | head -1)"
echo "            $(grep -E 'ember: NCCL' "$out/configure.txt" | head -1)"
echo "gpu:        $(tail -1 "$out/gpu.txt")"
echo "test_cuda:  rc=$tests_rc  $(grep -E 'test cases|All tests passed' "$out/test_cuda.txt" | tail -1)"
echo "bench:      rc=$bench_rc  ($(grep -c '"family"' "$out/bench.json") rows in bench.json)"
echo "torch peer: rc=$peer_rc"
[ $tests_rc -ne 0 ] && grep -B3 -A12 'FAILED' "$out/test_cuda.txt" | head -60
[ $bench_rc -ne 0 ] && tail -5 "$out/bench_err.txt"
exit $tests_rc
