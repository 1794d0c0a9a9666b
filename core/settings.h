// The process-wide switches, in one place: the CUDA backend's sync-debug
// mode, TF32 in f32 matmuls, cuDNN's benchmark and deterministic modes, and
// how the CPU multiplies bf16. Each is one atomic value defined in
// core/settings.cpp, in every build (a build without CUDA keeps the CUDA
// values; nothing reads them), read by the op or library call it steers at
// each call.
#pragma once

namespace ember {

/// Sync-debug mode (docs/tips.md #2): every op on a CUDA device synchronizes after
/// its launch, and a CUDA error or a raised error flag becomes an
/// ember::Error naming the op, its shapes, dtypes and device. Off by default;
/// EMBER_SYNC_DEBUG=1 in the environment turns it on at start-up.
void set_sync_debug(bool on);
bool sync_debug();

/// TF32 in f32 matrix products on CUDA (PyTorch's
/// torch.backends.cuda.matmul.allow_tf32): cuBLAS then rounds the operands
/// to 10 mantissa bits inside its tensor cores and accumulates in f32, for
/// several times the f32 rate and ~1e-3 relative error. Off by default, so
/// f32 products match the CPU's to f32 rounding. Read at each matmul; f16,
/// bf16 and f64 products ignore it.
void set_allow_tf32(bool on);
bool allow_tf32();

// cuDNN's convolution algorithm choice (docs/tips.md #7; docs/cuda.md,
// "Convolution (cuDNN)"); the cache they steer is kernels/conv_algos.h's.

/// Benchmark mode, on by default: the first conv2d (forward, backward data or
/// backward filter) of a shape on a CUDA device times cuDNN's candidate
/// algorithms — one host synchronization, once per shape — and caches the
/// fastest. Off: cuDNN's heuristic first choice, no timing. Choices made in
/// either mode are cached apart.
void set_cudnn_benchmark(bool on);
bool cudnn_benchmark();

/// Deterministic mode, off by default: only algorithms cuDNN marks
/// deterministic, so one process gets the same bits from the same inputs on
/// every call. Timing may pick another algorithm in another process: for the
/// same bits across runs, also turn benchmark mode off, or load the choices
/// of a previous run (load_conv_algorithms).
void set_cudnn_deterministic(bool on);
bool cudnn_deterministic();

/// How the CPU multiplies bf16 (docs/amp.md, "bf16 on the CPU"): `native` on
/// AVX512_BF16's dot-product instruction (VDPBF16PS), `emulated` by f32 FMAs
/// on the same packed operands in the same order — the same bits for normal
/// numbers, and no faster than f32. `automatic` (the default) takes native
/// where the CPU has the instruction. EMBER_CPU_BF16=auto|native|emulated in
/// the environment sets it at start-up; setting native on a CPU without the
/// instruction is an error.
enum class CpuBf16 { automatic, native, emulated };
void set_cpu_bf16(CpuBf16 mode);
CpuBf16 cpu_bf16();
/// Whether this CPU has AVX512_BF16 (cpuid).
bool cpu_has_avx512_bf16();
/// What runs now: native, or emulated (forced or for want of the instruction).
bool cpu_bf16_native();

}  // namespace ember
