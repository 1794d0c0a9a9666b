// The register tiles of the bf16 GEMM (kernels/cpu/gemm_bf16.cpp) and the
// loop that measures their instruction's peak. Internal to kernels/cpu/.
//
// Operands are bf16 pairs packed in 32-bit words: the low half holds the
// even k, the high half the odd k (VDPBF16PS's order). A tile's b panel is
// `pairs` rows of 64 words; its a rows are words at ap[r·rs + q·ks].
#pragma once

#include <cstdint>

namespace ember::kernels::cpu {

constexpr int64_t kBf16Mr = 6;   // rows of the register tile
constexpr int64_t kBf16Nr = 64;  // columns (4 vectors of 16 f32 sums)

/// Where a tile's sums go: the f32 scratch `t` (6 × 64, finished by the
/// caller), or — with `c` set — straight into a bf16 c (row stride ldc): each
/// sum plus bias[j] when `bias` is set, through ReLU when `relu` (max(x, 0)
/// with NaN and −0 passed: math::Relu), rounded to nearest even. The same
/// bits as t finished by the caller.
struct TileOut {
    float* t = nullptr;
    uint16_t* c = nullptr;
    int64_t ldc = 0;
    const float* bias = nullptr;
    bool relu = false;
};

/// The tile's sums, from zero: per pair q, each sum adds the odd k's
/// product, then the even k's (products exact in f32, each sum rounded to
/// nearest even) — on VDPBF16PS — into `out`. Needs AVX512_BF16
/// (cpu_bf16_native()).
void bf16_tile_native(int64_t pairs, const uint32_t* ap, int64_t rs, int64_t ks, const uint32_t* bp,
                      const TileOut& out);

/// The same sums by f32 FMAs in the same order: the same bits where no
/// operand, product or sum is subnormal (VDPBF16PS flushes those; the packing
/// flushes subnormal operands for both tiles). Any x86-64 CPU.
void bf16_tile_emulated(int64_t pairs, const uint32_t* ap, int64_t rs, int64_t ks,
                        const uint32_t* bp, const TileOut& out);

/// The native tile's rate without the GEMM around it: `iterations` tiles of
/// 64 k pairs on operands that stay in L1, filled from `values` (bf16 bits,
/// `count` of them, repeated as needed: a product's own operands — the
/// instruction's power, and so the clock, depends on the data, and constant
/// operands run faster than any real product). Returns the FLOPs done;
/// `sink` gets a value that depends on the sums. Needs AVX512_BF16.
double bf16_peak_loop(int64_t iterations, const uint16_t* values, int64_t count, float* sink);

}  // namespace ember::kernels::cpu
