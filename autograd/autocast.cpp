// The autocast state (per thread) and the one table of per-op policies.
#include "autograd/autocast.h"

#include <cstring>

namespace ember::amp {

namespace {

thread_local bool t_enabled = false;
thread_local DType t_dtype = DType::bf16;

struct Entry {
    const char* op;
    CastPolicy policy;
};

// The policy table (docs/amp.md mirrors it). Low precision where the tensor
// cores (and bandwidth) pay and f32 accumulation inside the kernel keeps the
// result accurate; f32 where a low-precision result or sum would lose the
// answer: exponentials and their sums, statistics, losses. Batch norm runs on
// its input as given (as PyTorch's autocast): its statistics are f64 sums on
// the CPU and f32 on CUDA whatever x's dtype, its weights stay f32, and a
// bf16 conv's output then needs no cast on either side.
constexpr Entry kPolicy[] = {
    {"matmul", CastPolicy::lower},     {"bmm", CastPolicy::lower},
    {"addmm", CastPolicy::lower},      {"linear", CastPolicy::lower},
    {"conv2d", CastPolicy::lower},     {"softmax", CastPolicy::f32},
    {"log_softmax", CastPolicy::f32},  {"layer_norm", CastPolicy::f32},
    {"cross_entropy", CastPolicy::f32},
    {"nll_loss", CastPolicy::f32},     {"mse_loss", CastPolicy::f32},
    {"sum", CastPolicy::f32},          {"mean", CastPolicy::f32},
    {"norm", CastPolicy::f32},         {"var", CastPolicy::f32},
    {"std", CastPolicy::f32},          {"linear_relu", CastPolicy::lower},
    {"linear_gelu", CastPolicy::lower},
    {"scaled_dot_product_attention", CastPolicy::lower},
    {"self_attention", CastPolicy::lower},
};

}  // namespace

autocast::autocast(DType dtype, bool enabled) : prev_enabled_(t_enabled), prev_dtype_(t_dtype) {
    EMBER_CHECK(dtype == DType::f16 || dtype == DType::bf16,
                "autocast: dtype must be f16 or bf16, got ", dtype_name(dtype));
    t_enabled = enabled;
    t_dtype = dtype;
}

autocast::~autocast() {
    t_enabled = prev_enabled_;
    t_dtype = prev_dtype_;
}

bool is_autocast_enabled() { return t_enabled; }
DType autocast_dtype() { return t_dtype; }

CastPolicy cast_policy(const char* op) {
    for (const Entry& e : kPolicy)
        if (std::strcmp(e.op, op) == 0) return e.policy;
    return CastPolicy::none;
}

Tensor cast_input(const char* op, const Tensor& t) {
    if (!t_enabled || !t.defined() || !is_floating(t.dtype())) return t;
    switch (cast_policy(op)) {
        case CastPolicy::lower:  // f64 is left alone, as PyTorch's autocast does
            return t.dtype() == t_dtype || t.dtype() == DType::f64 ? t : t.to(t_dtype);
        case CastPolicy::f32:
            return t.dtype() == DType::f16 || t.dtype() == DType::bf16 ? t.to(DType::f32) : t;
        case CastPolicy::none: return t;
    }
    return t;
}

}  // namespace ember::amp
