// Argument checks shared by the backends.
#include "dist/check.h"

#include "core/error.h"

namespace ember::dist {

void check_collective_tensor(const Tensor& t, const char* op) {
    EMBER_CHECK(t.defined(), op, ": the tensor is undefined");
    EMBER_CHECK(t.device().is_cpu(), op, ": the tensor is on ", t.device(),
                "; the MPI backend carries CPU tensors (CUDA tensors need NCCL)");
    EMBER_CHECK(t.is_contiguous(), op, ": the tensor of shape ", shape_str(t.shape()),
                " is not contiguous");
    const DType d = t.dtype();
    EMBER_CHECK(is_floating(d) || d == DType::i32 || d == DType::i64, op, ": dtype ", d,
                " is not carried (f32, f64, f16, bf16, i32, i64)");
}

void check_reduce_op(const Tensor& t, ReduceOp r, const char* op) {
    EMBER_CHECK(r != ReduceOp::average || is_floating(t.dtype()), op, ": an average of ",
                t.dtype(), " values; use sum");
}

void check_root(int root, int size, const char* op) {
    EMBER_CHECK(root >= 0 && root < size, op, ": root ", root, " is not a rank of ", size);
}

void check_gather_pair(const Tensor& whole, const Tensor& part, int size, const char* op) {
    check_collective_tensor(whole, op);
    check_collective_tensor(part, op);
    EMBER_CHECK(whole.dtype() == part.dtype(), op, ": dtypes differ (", whole.dtype(), " and ",
                part.dtype(), ")");
    EMBER_CHECK(whole.numel() == part.numel() * size, op, ": ", whole.numel(),
                " elements are not ", size, " blocks of ", part.numel());
}

}  // namespace ember::dist
