// A 16 × 16 block of f32 transposed in sixteen AVX-512-wide registers: the
// CPU kernels that need a matrix's columns as rows (the direct convolution's
// channel-last copies, attention's packed kᵀ and vᵀ) copy through it.
// Internal to kernels/cpu/.
#pragma once

namespace ember::kernels::cpu {

using vec16 = float __attribute__((vector_size(64)));
using ivec16 = int __attribute__((vector_size(64)));

/// r[i][j] → r[j][i] in four butterfly stages: stage b swaps bit b of the
/// row and the column index (two two-source shuffles per row pair).
inline void transpose16(vec16 r[16]) {
    auto stage = [&](int b, ivec16 lo, ivec16 hi) {
        for (int i = 0; i < 16; ++i) {
            if (i & b) continue;
            const vec16 x = r[i], y = r[i | b];
            r[i] = __builtin_shuffle(x, y, lo);
            r[i | b] = __builtin_shuffle(x, y, hi);
        }
    };
    // Row i (bit b clear) takes x[j] where j has bit b clear and y[j ^ b]
    // where it is set; row i | b takes x[j | b] and y[j].
    stage(8, ivec16{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
          ivec16{8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31});
    stage(4, ivec16{0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
          ivec16{4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31});
    stage(2, ivec16{0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
          ivec16{2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31});
    stage(1, ivec16{0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
          ivec16{1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31});
}

}  // namespace ember::kernels::cpu
