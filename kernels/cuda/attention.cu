// The fused CUDA attention's entry points: the plan (kernels/cuda/
// attention_plan.h) picks the kernels, this file turns views into their
// arguments and queues them: the tensor-core tiles (attention_tc.cu,
// attention_tc_backward.cu) or a warp per row and the decode split
// (attention_rows.cu). The backward first computes D = rowsum(dO ∘ out)
// into a workspace. docs/cuda.md, "Fused attention".
#include "kernels/cuda/attention.h"

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/workspace.h"

namespace ember::kernels::cuda {

namespace {

AttentionShape shape_of(const View& q, const View& v, bool causal) {
    AttentionShape s;
    s.bh = q.shape[0] * q.shape[1];
    s.heads = q.shape[1];
    s.tq = q.shape[2];
    s.tk = v.shape[2];
    s.d = q.shape[3];
    s.dv = v.shape[3];
    s.causal = causal;
    return s;
}

AttnScalars scalars_of(const AttentionArgs& args) {
    AttnScalars a;
    a.scale = float(args.scale);
    a.scale64 = args.scale;
    a.dropout_p = args.dropout_p;
    a.keep_scale = 1.0f / (1.0f - float(args.dropout_p));  // as the CPU kernel forms it
    a.keep_scale64 = 1.0 / (1.0 - args.dropout_p);
    a.seed = args.seed;
    a.first_block = args.first_block;
    return a;
}

size_t acc_size(DType dt) { return dt == DType::f64 ? 8 : 4; }

}  // namespace

bool attention_forward(const View& out, const View& lse, const View& q, const View& k,
                       const View& v, const AttentionArgs& args, StreamRef stream) {
    const AttentionShape s = shape_of(q, v, args.causal);
    const AttentionPlan p =
        attention_forward_plan(s, q.dtype, CudaContext::of(stream.device).properties().sm_count);
    const AttnScalars a = scalars_of(args);
    switch (p.path) {
        case AttentionPath::composite:
            return false;
        case AttentionPath::tensor_core:
            attention_forward_tc(p, q.dtype == DType::bf16, heads_of(out), lse.ptr<float>(),
                                 heads_of(q), heads_of(k), heads_of(v), a, stream);
            return true;
        case AttentionPath::warp_rows:
        case AttentionPath::decode:
            attention_forward_rows(p, q.dtype, heads_of(out), lse.data, heads_of(q), heads_of(k),
                                   heads_of(v), a, stream);
            return true;
    }
    return false;
}

bool attention_backward(const View& dq, const View& dk, const View& dv, const View& grad_out,
                        const View& q, const View& k, const View& v, const View& out,
                        const View& lse, const AttentionArgs& args, StreamRef stream) {
    const AttentionShape s = shape_of(q, v, args.causal);
    const AttentionPlan p = attention_backward_plan(s, q.dtype);
    if (p.path == AttentionPath::composite) return false;
    const AttnScalars a = scalars_of(args);
    const Workspace rowd(stream, size_t(s.bh * s.tq) * acc_size(q.dtype));
    attention_row_dots(s, q.dtype, rowd.as<void>(), heads_of(grad_out), heads_of(out), stream);
    if (p.path == AttentionPath::tensor_core)
        attention_backward_tc(p, q.dtype == DType::bf16, heads_of(dq), heads_of(dk), heads_of(dv),
                              heads_of(grad_out), heads_of(q), heads_of(k), heads_of(v),
                              lse.ptr<float>(), rowd.as<float>(), a, stream);
    else
        attention_backward_rows(p, q.dtype, heads_of(dq), heads_of(dk), heads_of(dv),
                                heads_of(grad_out), heads_of(q), heads_of(k), heads_of(v),
                                lse.data, rowd.as<void>(), a, stream);
    return true;
}

}  // namespace ember::kernels::cuda
