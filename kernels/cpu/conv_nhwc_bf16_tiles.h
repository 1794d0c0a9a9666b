// The register tiles of the bf16 channels-last convolutions
// (kernels/cpu/conv_nhwc_bf16.cpp): R pixels × V vectors of 16 output
// channels over pairs of bf16 (forward and grad_input), and R input
// channels × V vectors of output channels over image pairs (grad_weight);
// each on VDPBF16PS or its emulation by f32 FMAs in the same order.
// Internal to kernels/cpu/.
#pragma once

#include <cstdint>

namespace ember::kernels::cpu::nhwc_bf16 {

/// acc[r][v] = bias[16v ..] + Σ_t Σ_{k<K} x[r·ps + off[t] + k] ⊙ w[t·K·O + k·O + 16v ..]
/// over words of bf16 pairs (⊙: both halves' products, the odd one added
/// first), then y[r·ys + 16v ..] = acc rounded to bf16 (nearest even); bias
/// f32, may be null.
using TileFn = void (*)(const uint32_t* x, int64_t ps, const int64_t* off, int64_t taps,
                        int64_t K, const uint32_t* w, int64_t O, const float* bias, uint16_t* y,
                        int64_t ys);
/// The tiles of v vectors (1–4), indexed by pixels − 1 (up to nhwc::kMaxR[v]),
/// for calls with pixel step ps: VDPBF16PS where `native`, else its emulation.
const TileFn* tile_table(bool native, int v, int64_t ps);

/// acc[r][v] = Σ_{m, oy, ox} x[m·x_image + oy·xrow + ox·xs + r·rs] ⊙
/// dy[m·dy_image + oy·dy_row + ox·O + 16v] over words of image pairs (m <
/// images), then out[r·ldo + 16v] = acc (f32).
using WeightFn = void (*)(const uint32_t* dy, int64_t O, int64_t dy_row, int64_t dy_image,
                          const uint32_t* x, int64_t rs, int64_t xs, int64_t xrow,
                          int64_t x_image, int64_t images, int64_t oh, int64_t ow, float* out,
                          int64_t ldo);
/// The grad_weight tiles of v vectors (1, 2 or 4), indexed by rows − 1 (up
/// to kWeightRows / v), for calls with row step rs.
const WeightFn* weight_table(bool native, int64_t v, int64_t rs);
inline constexpr int kWeightRows = 24;  // accumulators of a grad_weight tile

}  // namespace ember::kernels::cpu::nhwc_bf16
