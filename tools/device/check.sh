#!/usr/bin/env bash
# One run on a machine with an NVIDIA GPU: build the CUDA backend for sm_90,
# run the CUDA tests (CUDA against the CPU backend), the benchmarks, and print
# a short table last. Expects .deps from tools/device/prepare.sh when the
# Debian packages are missing. Results go to $OUT (or ./device-out).
set -uo pipefail
cd "$(dirname "$0")/../.."
out="${OUT:-device-out}"
mkdir -p "$out"
export PATH="/usr/local/cuda/bin:$PATH"
prefix=()
[ -d .deps/usr ] && prefix=(-DCMAKE_PREFIX_PATH="$PWD/.deps/usr")
start=$(date +%s)
cmake -S . -B build/device -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90 "${prefix[@]}" > "$out/configure.txt" 2>&1 \
    || { tail -30 "$out/configure.txt"; exit 1; }
cmake --build build/device -j "$(nproc)" --target test_cuda ember_cli > "$out/build.txt" 2>&1 \
    || { grep -E 'error|FAILED' "$out/build.txt" | head -30; exit 1; }
built=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1
build/device/tools/ember info | tee "$out/info.txt"
build/device/tests/test_cuda > "$out/test_cuda.txt" 2>&1
tests_rc=$?
build/device/tools/ember bench --json > "$out/bench.json" 2> "$out/bench_err.txt"
bench_rc=$?
echo
echo "== summary (build $((built - start)) s)"
echo "gpu:        $(tail -1 "$out/gpu.txt")"
echo "test_cuda:  rc=$tests_rc  $(grep -E 'test cases|All tests passed' "$out/test_cuda.txt" | tail -1)"
echo "bench:      rc=$bench_rc  ($(grep -c '"family"' "$out/bench.json") rows in bench.json)"
[ $tests_rc -ne 0 ] && grep -B3 -A12 'FAILED' "$out/test_cuda.txt" | head -60
exit $tests_rc
