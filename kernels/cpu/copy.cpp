// CPU copies and casts between every pair of dtypes, on any strides.
// Math: dst[i] = math::cast<To>(src[i]) (kernels/math.h, shared with the CUDA
// twin kernels/cuda/copy.cu). Bytes: numel * (sizeof(src) + sizeof(dst)); FLOPs: 0.
// Three paths: dense same-dtype copies are memcpy in per-thread chunks; copies
// whose source is transposed relative to the destination go tile by tile so
// both sides stay in cache; everything else runs on the strided loop.
// Test: tests/kernels/test_copy.cpp; bench: `ember bench copy`.
#include "kernels/cpu/copy.h"

#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "kernels/cpu/loop.h"
#include "kernels/math.h"

namespace ember::kernels::cpu {

namespace {

// perf: transposing copies reach ~5 GB/s on 4096^2 f32 (power-of-two strides alias in
// L1); an 8x8 in-register transpose is the next step if this shows up in a profile.
constexpr int64_t kTile = 16;

// A 1-d run of casts; f32 -> f16 uses the F16C instruction when the CPU has it
// (round to nearest even, NaN handling identical to core/half.h, tested).
template <class To, class From>
void cast_run(To* o, const From* in, int64_t n) {
#if defined(__F16C__)
    if constexpr (std::is_same_v<To, Half> && std::is_same_v<From, float>) {
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i), h);
        }
        for (; i < n; ++i) o[i] = math::cast<To>(in[i]);
        return;
    }
#endif
    for (int64_t i = 0; i < n; ++i) o[i] = math::cast<To>(in[i]);
}

// Finds a dim (other than the innermost) along which the source is dense while
// the destination is dense along the innermost dim: a transpose. Returns -1 if none.
int transposed_dim(const StridedLoop<2>& L, int64_t dst_esize, int64_t src_esize) {
    const int last = L.ndim - 1;
    if (L.ndim < 2 || L.strides[0][last] != dst_esize || L.strides[1][last] == src_esize) return -1;
    for (int j = 0; j < last; ++j)
        if (L.strides[1][j] == src_esize && L.shape[j] >= kTile && L.shape[last] >= kTile) return j;
    return -1;
}

// Tiled copy over the plane (dim j, innermost dim), planes and tiles split across threads.
template <class To, class From>
void copy_tiled(const StridedLoop<2>& L, int j) {
    const int last = L.ndim - 1;
    const int64_t rows = L.shape[j], cols = L.shape[last];
    int64_t planes = 1;
    for (int d = 0; d < last; ++d)
        if (d != j) planes *= L.shape[d];
    const int64_t row_tiles = (rows + kTile - 1) / kTile;
    const int64_t tasks = planes * row_tiles;
#pragma omp parallel for schedule(static) if (tasks > 1 && L.numel >= kParallelGrain)
    for (int64_t task = 0; task < tasks; ++task) {
        int64_t p = task / row_tiles;
        const int64_t r0 = (task % row_tiles) * kTile, r1 = std::min(rows, r0 + kTile);
        char* d = L.base[0];
        const char* s = L.base[1];
        for (int dim = last - 1; dim >= 0; --dim) {  // unravel the plane index
            if (dim == j) continue;
            const int64_t k = p % L.shape[dim];
            p /= L.shape[dim];
            d += k * L.strides[0][dim];
            s += k * L.strides[1][dim];
        }
        for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
            const int64_t c1 = std::min(cols, c0 + kTile);
            for (int64_t r = r0; r < r1; ++r) {
                To* o = reinterpret_cast<To*>(d + r * L.strides[0][j]);
                const char* in = s + r * L.strides[1][j];
                for (int64_t c = c0; c < c1; ++c)
                    o[c] =
                        math::cast<To>(*reinterpret_cast<const From*>(in + c * L.strides[1][last]));
            }
        }
    }
}

}  // namespace

void copy(const View& dst, const View& src) {
    if (dst.dtype == src.dtype && dst.is_contiguous() && src.is_contiguous() &&
        dst.numel() == src.numel()) {
        const int64_t nbytes = dst.numel() * dtype_size(dst.dtype);
        View bytes_dst, bytes_src;  // reinterpret as flat u8 so the loop splits it across threads
        bytes_dst.data = dst.data;
        bytes_src.data = src.data;
        bytes_dst.dtype = bytes_src.dtype = DType::u8;
        bytes_dst.ndim = bytes_src.ndim = 1;
        bytes_dst.shape[0] = bytes_src.shape[0] = nbytes;
        bytes_dst.strides[0] = bytes_src.strides[0] = 1;
        const StridedLoop<2> L = make_loop<2>({&bytes_dst, &bytes_src});
        for_each_run(
            L, [](char** p, const int64_t*, int64_t n) { std::memcpy(p[0], p[1], size_t(n)); },
            int64_t(1) << 18);
        return;
    }
    visit_dtype(dst.dtype, [&](auto to_tag) {
        using To = typename decltype(to_tag)::type;
        visit_dtype(src.dtype, [&](auto from_tag) {
            using From = typename decltype(from_tag)::type;
            const StridedLoop<2> L = make_loop<2>({&dst, &src});
            if (const int j = transposed_dim(L, sizeof(To), sizeof(From)); j >= 0) {
                copy_tiled<To, From>(L, j);
                return;
            }
            for_each_run(L, [](char** p, const int64_t* s, int64_t n) {
                To* o = reinterpret_cast<To*>(p[0]);
                if (s[0] == int64_t(sizeof(To)) && s[1] == int64_t(sizeof(From))) {
                    cast_run(o, reinterpret_cast<const From*>(p[1]), n);
                } else {
                    for (int64_t i = 0; i < n; ++i)
                        *reinterpret_cast<To*>(p[0] + i * s[0]) =
                            math::cast<To>(*reinterpret_cast<const From*>(p[1] + i * s[1]));
                }
            });
        });
    });
}

void fill(const View& dst, double value) {
    visit_dtype(dst.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T v = math::cast<T>(value);
        map<T>(dst, [v]() { return v; });
    });
}

}  // namespace ember::kernels::cpu
