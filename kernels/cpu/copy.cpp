// CPU copies and casts between every pair of dtypes, on any strides.
// Bytes: numel * (sizeof(src) + sizeof(dst)); FLOPs: none. Same-dtype dense
// copies go through memcpy in per-thread chunks.
#include "kernels/cpu/copy.h"

#include <cstring>

#include "kernels/cpu/loop.h"
#include "kernels/math.h"

namespace ember::kernels::cpu {

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
        for_each_run(L, [](char** p, const int64_t*, int64_t n) { std::memcpy(p[0], p[1], size_t(n)); },
                     int64_t(1) << 18);
        return;
    }
    visit_dtype(dst.dtype, [&](auto to_tag) {
        using To = typename decltype(to_tag)::type;
        visit_dtype(src.dtype, [&](auto from_tag) {
            using From = typename decltype(from_tag)::type;
            map<To, From>(dst, [](From v) { return math::cast<To>(v); }, src);
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
