// CPU cat: inputs copied back to back along `dim` into a new tensor (stack is
// cat of unsqueezed views; split and chunk are views and need no kernel).
//
// Math:   out[..., off_i + j, ...] = cast(in_i[..., j, ...]), off_i = sum of earlier sizes.
// Dtypes: any; inputs of another dtype are converted to out's (cpu::copy's casts).
// Bytes:  numel(out) * sizeof(out) written + each input read once. FLOPs: none.
// Layout: when out and every input are dense and of out's dtype, each output
//         row (the dims before `dim`) is the inputs' rows back to back, copied
//         with memcpy, rows split across threads; otherwise each input goes
//         through cpu::copy into its slice of out (strided, casting).
// Deterministic: pure copies. Tests: tests/kernels/test_shape_ops.cpp.
#include "kernels/cpu/shape_ops.h"

#include <omp.h>

#include <cstring>

#include "kernels/cpu/copy.h"

namespace ember::kernels::cpu {

namespace {

// Below this many bytes a dense cat runs on one thread.
constexpr int64_t kParallelBytes = int64_t(1) << 18;

bool dense_of(const View& v, DType dtype) { return v.dtype == dtype && v.is_contiguous(); }

void cat_dense(const View& out, std::span<const View> inputs, int dim) {
    const int64_t elem = dtype_size(out.dtype);
    int64_t rows = 1;  // product of the dims before `dim`
    for (int d = 0; d < dim; ++d) rows *= out.shape[d];
    const int64_t out_row = out.numel() / rows * elem;
    if (rows == 1) {  // dim 0 (or leading 1s): one block per input, copy splits it across threads
        int64_t at = 0;
        for (const View& in : inputs) {
            View dst = in;
            dst.data = out.data + at;
            copy(dst, in);
            at += in.numel() * elem;
        }
        return;
    }
    const int64_t total = out.numel() * elem;
#pragma omp parallel for schedule(static) if (total >= kParallelBytes && !omp_in_parallel())
    for (int64_t r = 0; r < rows; ++r) {
        char* dst = out.data + r * out_row;
        for (const View& in : inputs) {
            const int64_t in_row = in.numel() / rows * elem;
            std::memcpy(dst, in.data + r * in_row, size_t(in_row));
            dst += in_row;
        }
    }
}

}  // namespace

void cat(const View& out, std::span<const View> inputs, int dim) {
    if (out.numel() == 0) return;
    bool dense = out.is_contiguous();
    for (const View& in : inputs) dense = dense && dense_of(in, out.dtype);
    if (dense) {
        cat_dense(out, inputs, dim);
        return;
    }
    int64_t at = 0;  // start of the current input's slice along dim
    for (const View& in : inputs) {
        View slice = out;
        slice.shape[dim] = in.shape[dim];
        slice.data = out.data + at * out.strides[dim] * dtype_size(out.dtype);
        if (in.numel() > 0) copy(slice, in);
        at += in.shape[dim];
    }
}

}  // namespace ember::kernels::cpu
