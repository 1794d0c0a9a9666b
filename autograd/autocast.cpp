// The autocast state (per thread) and the one table of per-op policies.
#include "autograd/autocast.h"

#include <cstring>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/storage.h"

namespace ember::amp {

namespace {

thread_local bool t_enabled = false;
thread_local DType t_dtype = DType::bf16;

// Note [The autocast cast cache]
// A weight — a leaf that requires grad — used by several low-precision ops
// in one autocast scope (a tied embedding and head, a layer applied twice, a
// recurrence) is cast once: the first cast (a recorded `to`) is kept until
// the outermost enabled scope ends, and later uses get the same tensor, so
// the gradients of every use meet at that one cast and go back to f32 once.
// A step's forward runs in one scope, so each weight's low-precision copy is
// made once per step. An entry is used only while the weight's storage
// version is the one it was cast at (an in-place update inside the scope
// makes a new copy), while grad mode is on, as when it was made (a cast
// made without grad mode has no graph to share), and while a backward can
// still walk through its cast (a cast saves nothing, so a scope around
// several forwards and backwards keeps it). Per thread, like the state.
struct CachedCast {
    Tensor source;  // held, so that its address names it while cached
    uint64_t version;
    DType dtype;
    Tensor cast;
};
thread_local std::vector<CachedCast> t_cache;

bool cacheable(const Tensor& t) {
    return GradMode::is_enabled() && t.requires_grad() && t.is_leaf();
}

Tensor cached_cast(const Tensor& t, DType dtype) {
    if (!cacheable(t)) return t.to(dtype);
    const uint64_t version = t.storage()->version();
    for (const CachedCast& c : t_cache)
        if (c.source.unsafe_impl() == t.unsafe_impl() && c.dtype == dtype) {
            const std::shared_ptr<autograd::Node> node = c.cast.grad_fn();
            if (c.version == version && node && !node->released()) return c.cast;
            break;
        }
    Tensor cast = t.to(dtype);
    std::erase_if(t_cache, [&](const CachedCast& c) {
        return c.source.unsafe_impl() == t.unsafe_impl() && c.dtype == dtype;
    });
    t_cache.push_back({t, version, dtype, cast});
    return cast;
}

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
    if (!t_enabled) t_cache.clear();  // the outermost enabled scope ends
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
            return t.dtype() == t_dtype || t.dtype() == DType::f64 ? t : cached_cast(t, t_dtype);
        case CastPolicy::f32:
            return t.dtype() == DType::f16 || t.dtype() == DType::bf16 ? t.to(DType::f32) : t;
        case CastPolicy::none: return t;
    }
    return t;
}

}  // namespace ember::amp
