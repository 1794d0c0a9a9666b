// Stride-phase planes: the layout the direct and depthwise CPU convolutions
// (kernels/cpu/conv_direct.cpp, conv_depthwise.cpp) compute on. Internal to
// those files.
//
// The zero-padded input is split by stride phase: plane (a, b)[c][u·Wv + v]
// = in[c][u·sh + a − ph][v·sw + b − pw] (sh·sw planes; one for stride 1).
// Tap (i, j) of the kernel reads plane (i·dh mod sh, j·dw mod sw) at offset
// ⌊i·dh/sh⌋·Wv + ⌊j·dw/sw⌋ from output position q = oy·Wv + ox, so every tap
// is a unit-stride run of q: outputs are computed over the "virtual" row
// width Wv ≥ OW and the columns past OW are dropped.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../conv_args.h"

namespace ember::kernels::cpu::planes {

struct Planes {
    int64_t planes, hv, wv;  // sh·sw planes of Hv × Wv
    int64_t q;               // OH·Wv virtual output positions
    int64_t taps;
    int64_t max_off;                  // the largest tap offset
    std::vector<int64_t> plane, off;  // per tap: its plane and offset in it
    std::vector<char> used;           // per plane: read by some tap
};

inline Planes make_planes(const Conv2dShape& s) {
    Planes g;
    g.planes = s.sh * s.sw;
    g.hv = (s.h + 2 * s.ph + s.sh - 1) / s.sh;
    g.wv = (s.w + 2 * s.pw + s.sw - 1) / s.sw;
    g.q = s.oh * g.wv;
    g.taps = s.kh * s.kw;
    g.max_off = 0;
    g.used.assign(size_t(g.planes), 0);
    for (int64_t i = 0; i < s.kh; ++i)
        for (int64_t j = 0; j < s.kw; ++j) {
            const int64_t di = i * s.dh, dj = j * s.dw;
            g.plane.push_back((di % s.sh) * s.sw + dj % s.sw);
            g.off.push_back(di / s.sh * g.wv + dj / s.sw);
            g.used[size_t(g.plane.back())] = 1;
            g.max_off = std::max(g.max_off, g.off.back());
        }
    return g;
}

/// Plane columns v of phase b whose input column v·sw + b − pw lies in [0, W): [v0, v1).
inline void inside_columns(const Conv2dShape& s, const Planes& g, int64_t b, int64_t* v0,
                           int64_t* v1) {
    *v0 = std::max<int64_t>(0, (s.pw - b + s.sw - 1) / s.sw);
    *v1 = std::max(*v0, std::min(g.wv, (s.w + s.pw - b + s.sw - 1) / s.sw));
}

namespace strided {

// Vectors of 16 and 8 f32 lanes, and their shuffle masks.
using vec16 = float __attribute__((vector_size(64)));
using ivec16 = int __attribute__((vector_size(64)));
using vec8 = float __attribute__((vector_size(32)));
using ivec8 = int __attribute__((vector_size(32)));
template <class V>
inline V load(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
template <class V>
inline void store(float* p, V v) {
    std::memcpy(p, &v, sizeof v);
}

// Calls block(v) for blocks of W elements covering [0, n), the last one
// overlapping the one before; false (nothing called) when n < W.
template <int64_t W, class F>
bool cover(int64_t n, F&& block) {
    if (n < W) return false;
    for (int64_t v = 0; v + W <= n; v += W) block(v);
    if (n % W) block(n - W);
    return true;
}

// dst[v + i] = src[2(v + i)] for i < W: reads src[2v, 2v + 2W).
inline void gather16(const float* src, float* dst, int64_t v) {
    store(dst + v,
          __builtin_shuffle(load<vec16>(src + 2 * v), load<vec16>(src + 2 * v + 16),
                            ivec16{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30}));
}
inline void gather8(const float* src, float* dst, int64_t v) {
    store(dst + v, __builtin_shuffle(load<vec8>(src + 2 * v), load<vec8>(src + 2 * v + 8),
                                     ivec8{0, 2, 4, 6, 8, 10, 12, 14}));
}

// out[2(v + i)] = src[v + i] for i < W, blended into out[2v, 2v + 2W) (the
// odd ones read and written back unchanged).
inline void scatter16(const float* src, float* out, int64_t v) {
    const vec16 x = load<vec16>(src + v);
    float* o = out + 2 * v;
    store(o, __builtin_shuffle(load<vec16>(o), x,
                               ivec16{16, 1, 17, 3, 18, 5, 19, 7, 20, 9, 21, 11, 22, 13, 23, 15}));
    store(o + 16,
          __builtin_shuffle(load<vec16>(o + 16), x,
                            ivec16{24, 1, 25, 3, 26, 5, 27, 7, 28, 9, 29, 11, 30, 13, 31, 15}));
}
inline void scatter8(const float* src, float* out, int64_t v) {
    const vec8 x = load<vec8>(src + v);
    float* o = out + 2 * v;
    store(o, __builtin_shuffle(load<vec8>(o), x, ivec8{8, 1, 9, 3, 10, 5, 11, 7}));
    store(o + 8, __builtin_shuffle(load<vec8>(o + 8), x, ivec8{12, 1, 13, 3, 14, 5, 15, 7}));
}

}  // namespace strided

/// dst[0, n) = src[0, n) for the short rows of a plane, inline: whole
/// vectors, the last one overlapping the one before (a library call per row
/// costs more than a 28-float row). The two ranges must not overlap.
template <class T>
void copy_row(const T* src, int64_t n, T* dst) {
    if constexpr (std::is_same_v<T, float>) {
        auto move = [&]<int64_t kFloats>(int64_t i) {
            float x[kFloats];
            std::memcpy(x, src + i, sizeof x);
            std::memcpy(dst + i, x, sizeof x);
        };
        if (n >= 16) {
            for (int64_t i = 0; i + 16 <= n; i += 16) move.template operator()<16>(i);
            if (n % 16) move.template operator()<16>(n - 16);
        } else if (n >= 8) {
            move.template operator()<8>(0);
            move.template operator()<8>(n - 8);
        } else if (n >= 4) {
            move.template operator()<4>(0);
            move.template operator()<4>(n - 4);
        } else {
            for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
        }
    } else {
        std::copy(src, src + n, dst);
    }
}

/// dst[v] = src[v·step] for v < count: a copy for step 1; for f32 at step 2
/// blocks of 16 (or 8) from twice as many floats, the even ones kept, the
/// last block overlapping the one before. A block's reads end at an odd
/// offset, so the blocks cover the first count − 1 elements (no read past
/// the last element used) and the last one is moved alone.
template <class T>
void gather_strided(const T* src, int64_t step, int64_t count, T* dst) {
    if (step == 1) {
        copy_row(src, count, dst);
        return;
    }
    int64_t v = 0;
    if constexpr (std::is_same_v<T, float>) {
        using namespace strided;
        if (step == 2 && (cover<16>(count - 1, [&](int64_t b) { gather16(src, dst, b); }) ||
                          cover<8>(count - 1, [&](int64_t b) { gather8(src, dst, b); })))
            v = count - 1;
    }
    for (; v < count; ++v) dst[v] = src[v * step];
}

/// out[v·step] = src[v] for v < count: a copy for step 1; for f32 at step 2
/// blocks of 16 (or 8) blended into the twice as many floats they lie among
/// (the odd ones read and written back unchanged), covering the first
/// count − 1 elements as gather_strided does; the last one alone.
template <class T>
void scatter_strided(const T* src, int64_t step, int64_t count, T* out) {
    if (step == 1) {
        copy_row(src, count, out);
        return;
    }
    int64_t v = 0;
    if constexpr (std::is_same_v<T, float>) {
        using namespace strided;
        if (step == 2 && (cover<16>(count - 1, [&](int64_t b) { scatter16(src, out, b); }) ||
                          cover<8>(count - 1, [&](int64_t b) { scatter8(src, out, b); })))
            v = count - 1;
    }
    for (; v < count; ++v) out[v * step] = src[v];
}

/// `channels` channels of an image in [C, H, W] into planes: plane p's
/// channel c at planes + p·pstride + c·cstride, `len` ≥ Hv·Wv elements each
/// (zero past Hv·Wv and outside the input); only the planes that taps read.
template <class T>
void to_planes(const Conv2dShape& s, const Planes& g, int64_t channels, const T* in, T* planes,
               int64_t pstride, int64_t cstride, int64_t len) {
    for (int64_t p = 0; p < g.planes; ++p) {
        if (!g.used[size_t(p)]) continue;
        const int64_t a = p / s.sw, b = p % s.sw;
        int64_t v0, v1;
        inside_columns(s, g, b, &v0, &v1);
        for (int64_t c = 0; c < channels; ++c) {
            T* dst = planes + p * pstride + c * cstride;
            std::fill(dst, dst + len, T(0));  // one fill: cheaper than many short ones
            for (int64_t u = 0; u < g.hv; ++u) {
                const int64_t iy = u * s.sh + a - s.ph;
                if (iy < 0 || iy >= s.h || v1 == v0) continue;  // no input columns: nothing to move
                gather_strided(in + (c * s.h + iy) * s.w + (v0 * s.sw + b - s.pw), s.sw, v1 - v0,
                               dst + u * g.wv + v0);
            }
        }
    }
}

/// The inverse gather: plane p's channel c (at planes + p·pstride +
/// c·cstride) back into [C, H, W] at out, the padding positions dropped; a
/// plane with written[p] false gives zeros.
template <class T>
void from_planes(const Conv2dShape& s, const Planes& g, int64_t channels, const T* planes,
                 int64_t pstride, int64_t cstride, const std::vector<char>& written, T* out) {
    const int64_t hw = s.h * s.w;
    for (int64_t p = 0; p < g.planes; ++p) {
        const int64_t a = p / s.sw, b = p % s.sw;
        const bool read = written[size_t(p)] != 0;
        int64_t v0, v1;
        inside_columns(s, g, b, &v0, &v1);
        for (int64_t c = 0; c < channels; ++c) {
            const T* src = planes + p * pstride + c * cstride;
            for (int64_t u = 0; u < g.hv; ++u) {
                const int64_t iy = u * s.sh + a - s.ph;
                if (iy < 0 || iy >= s.h || v1 == v0) continue;  // no input columns: nothing to move
                T* row = out + c * hw + iy * s.w + (v0 * s.sw + b - s.pw);
                if (read)
                    scatter_strided(src + u * g.wv + v0, s.sw, v1 - v0, row);
                else
                    for (int64_t v = v0; v < v1; ++v) row[(v - v0) * s.sw] = T(0);
            }
        }
    }
}

/// `channels` channels of grad_out [channels, OH, OW] into the virtual
/// layout of row width wv: channel o's `len` elements at v + o·ds, position
/// oy·wv + ox at v[o·ds + front + oy·wv + ox]; zero everywhere else.
/// Needs len ≥ front + OH·wv and wv ≥ OW.
template <class T>
void to_virtual(const Conv2dShape& s, int64_t wv, int64_t channels, const T* dy, int64_t front,
                int64_t len, int64_t ds, T* v) {
    for (int64_t o = 0; o < channels; ++o) {
        T* dst = v + o * ds;
        std::fill(dst, dst + len, T(0));
        for (int64_t oy = 0; oy < s.oh; ++oy)
            copy_row(dy + (o * s.oh + oy) * s.ow, s.ow, dst + front + oy * wv);
    }
}

}  // namespace ember::kernels::cpu::planes
