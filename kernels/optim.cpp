// Fronts of the fused multi-tensor updates: the checks (lengths, shapes,
// dtypes, devices, density), the grouping of the tensors into one UpdateList
// per dtype signature with its chunk table, one dispatch per list, and the
// version bumps of what was written. Kernels: kernels/cpu/optim.cpp and
// kernels/cuda/optim.cu (which reads its scalars, the norm, the inverse
// scale and the found-inf flag, from device memory: no host sync), and the
// loss scaler's scale update.
#include "kernels/optim.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "kernels/cpu/optim.h"
#include "kernels/cuda/optim.h"
#include "kernels/front.h"

namespace ember::kernels {

std::vector<Chunk> chunk_table(const std::vector<int64_t>& numels, int64_t chunk) {
    EMBER_CHECK(chunk > 0, "chunk_table: chunk size must be positive, got ", chunk);
    std::vector<Chunk> table;
    for (size_t t = 0; t < numels.size(); ++t)
        for (int64_t b = 0; b < numels[t]; b += chunk)
            table.push_back({int32_t(t), b, std::min(chunk, numels[t] - b)});
    return table;
}

namespace {

void check_dense(const char* op, const char* what, size_t i, const Tensor& t, const Tensor& param) {
    EMBER_CHECK(t.defined() && t.shape() == param.shape() && t.is_contiguous() &&
                    t.device() == param.device(),
                op, ": ", what, " ", i, " must be a contiguous tensor of shape ",
                shape_str(param.shape()), " on ", param.device(), ", got ", describe(t));
}

// The lists of `t` grouped by dtype signature, after every check. `states`
// is how many state buffers the rule needs per parameter.
std::vector<UpdateList> make_lists(const char* op, const UpdateTensors& t, size_t states) {
    const size_t n = t.params.size();
    EMBER_CHECK(t.grads.size() == n, op, ": ", n, " parameters but ", t.grads.size(), " gradients");
    EMBER_CHECK((states >= 1 ? t.state1.size() == n : t.state1.empty()) &&
                    (states >= 2 ? t.state2.size() == n : t.state2.empty()) &&
                    (states >= 3 ? t.state3.size() == n : t.state3.empty()),
                op, ": expected ", states, " state buffer(s) per parameter for ", n,
                " parameters, got ", t.state1.size(), ", ", t.state2.size(), " and ",
                t.state3.size());
    EMBER_CHECK(t.copies.empty() || t.copies.size() == n, op, ": ", n, " parameters but ",
                t.copies.size(), " copies");
    EMBER_CHECK(t.steps.empty() || t.steps.size() == n, op, ": ", n, " parameters but ",
                t.steps.size(), " step counts");
    EMBER_CHECK(t.next_steps.size() == t.steps.size(), op, ": ", t.steps.size(),
                " step counts but ", t.next_steps.size(),
                " next step counts (each count read needs a place for the next one)");
    const Device dev = n > 0 && t.params[0].defined() ? t.params[0].device() : Device::cpu();
    // No next count may overwrite a count read by this update: the counts
    // read, sorted, then each next count looked up (one allocation per call).
    std::vector<const void*> read;
    read.reserve(t.steps.size());
    for (const auto* list : {&t.steps, &t.next_steps}) {
        if (list == &t.next_steps) std::sort(read.begin(), read.end());
        for (size_t i = 0; i < list->size(); ++i) {
            const Tensor& c = (*list)[i];
            const char* what = list == &t.steps ? "step count " : "next step count ";
            EMBER_CHECK(c.defined() && c.numel() == 1 && c.dtype() == DType::i64 &&
                            c.device() == dev,
                        op, ": ", what, i, " must be a one-element i64 tensor on ", dev,
                        ", got ", describe(c));
            if (list == &t.steps)
                read.push_back(c.data_ptr());
            else
                EMBER_CHECK(!std::binary_search(read.begin(), read.end(), c.data_ptr()), op,
                            ": next step count ", i,
                            " is the memory of a step count the update reads; give it its "
                            "own (Note [Device step counts])");
        }
    }
    const Tensor* tables[] = {&t.lr_table, &t.momentum_table};
    for (const Tensor* tb : tables) {
        if (!tb->defined()) continue;
        EMBER_CHECK(!t.steps.empty() || n == 0, op,
                    ": a schedule table needs the parameters' step counts (it is read at "
                    "each tensor's count)");
        EMBER_CHECK(tb->dim() == 1 && tb->numel() >= 1 && tb->dtype() == DType::f64 &&
                        tb->is_contiguous() && tb->device() == dev,
                    op, ": a schedule table must be a non-empty contiguous f64 vector on ", dev,
                    ", got ", describe(*tb));
    }
    EMBER_CHECK(!t.lr_table.defined() || !t.momentum_table.defined() ||
                    t.lr_table.numel() == t.momentum_table.numel(),
                op, ": the LR table has ", t.lr_table.numel(), " entries, the momentum table ",
                t.momentum_table.numel());
    ScheduleTables tab;
    if (t.lr_table.defined()) tab = {t.lr_table.data<double>(), nullptr, t.lr_table.numel()};
    if (t.momentum_table.defined()) {
        tab.momentum = t.momentum_table.data<double>();
        tab.size = t.momentum_table.numel();
    }
    if (t.found_inf.defined())
        EMBER_CHECK(t.found_inf.numel() == 1 && t.found_inf.dtype() == DType::f32 &&
                        t.found_inf.device() == dev,
                    op, ": found_inf must be a one-element f32 tensor on ", dev, ", got ",
                    describe(t.found_inf));
    std::map<std::tuple<DType, DType, int>, UpdateList> lists;  // ordered: deterministic
    for (size_t i = 0; i < n; ++i) {
        const Tensor& p = t.params[i];
        EMBER_CHECK(p.defined() && is_floating(p.dtype()) && p.is_contiguous(), op, ": parameter ",
                    i, " must be a contiguous floating tensor, got ", describe(p));
        EMBER_CHECK(p.device() == t.params[0].device(), op, ": parameter ", i, " is ",
                    describe(p), " but parameter 0 is on ", t.params[0].device());
        check_dense(op, "gradient", i, t.grads[i], p);
        const DType g = t.grads[i].dtype();
        EMBER_CHECK(g == p.dtype() || (p.dtype() == DType::f32 && (g == DType::f16 || g == DType::bf16)),
                    op, ": gradient ", i, " ", describe(t.grads[i]), " cannot update parameter ",
                    describe(p), " (same dtype, or f16/bf16 gradients of f32 master weights)");
        const std::vector<const Tensor*> state = {states >= 1 ? &t.state1[i] : nullptr,
                                                  states >= 2 ? &t.state2[i] : nullptr,
                                                  states >= 3 ? &t.state3[i] : nullptr};
        for (const Tensor* s : state) {
            if (!s) continue;
            check_dense(op, "state buffer", i, *s, p);
            EMBER_CHECK(s->dtype() == acc_dtype(p.dtype()), op, ": state buffer ", i,
                        " must be ", dtype_name(acc_dtype(p.dtype())), " for parameter ",
                        describe(p), ", got ", describe(*s));
        }
        int copy = -1;  // none
        if (!t.copies.empty()) {
            const Tensor& c = t.copies[i];
            check_dense(op, "copy", i, c, p);
            EMBER_CHECK(p.dtype() == DType::f32 && (c.dtype() == DType::f16 || c.dtype() == DType::bf16),
                        op, ": copy ", i, " must be f16 or bf16 of an f32 parameter, got ",
                        describe(c), " for ", describe(p));
            copy = int(c.dtype());
        }
        UpdateList& l = lists[{p.dtype(), g, copy}];
        l.param = p.dtype();
        l.grad = g;
        if (copy >= 0) l.copy = DType(copy);
        l.stochastic_copy = t.stochastic_copy;
        l.seed = t.seed;
        l.step = t.step;
        l.found_inf = t.found_inf.defined() ? t.found_inf.data<float>() : nullptr;
        l.tables = tab;
        l.slots.push_back({p.data_ptr(), t.grads[i].data_ptr(),
                           states >= 1 ? t.state1[i].data_ptr() : nullptr,
                           states >= 2 ? t.state2[i].data_ptr() : nullptr,
                           states >= 3 ? t.state3[i].data_ptr() : nullptr,
                           copy >= 0 ? t.copies[i].data_ptr() : nullptr, p.numel(),
                           t.steps.empty() ? nullptr : t.steps[i].data<int64_t>(),
                           t.steps.empty() ? nullptr : t.next_steps[i].data<int64_t>()});
    }
    std::vector<UpdateList> out;
    for (auto& [key, l] : lists) {
        std::vector<int64_t> numels;
        for (const UpdateSlot& s : l.slots) numels.push_back(s.numel);
        l.chunks = chunk_table(numels);
        out.push_back(std::move(l));
    }
    return out;
}

// What an update wrote: every parameter, state buffer, copy and next step count.
void bump_versions(const UpdateTensors& t) {
    for (const auto* list : {&t.params, &t.state1, &t.state2, &t.state3, &t.copies, &t.next_steps})
        for (const Tensor& x : *list) x.storage()->bump_version();
}

// The dense floating tensors of a gradient pass grouped by dtype; `param`
// of each slot is the tensor's buffer.
std::vector<UpdateList> grad_lists(const char* op, const std::vector<Tensor>& ts) {
    std::map<DType, UpdateList> lists;
    for (size_t i = 0; i < ts.size(); ++i) {
        const Tensor& x = ts[i];
        EMBER_CHECK(x.defined() && is_floating(x.dtype()) && x.is_contiguous(), op, ": tensor ",
                    i, " must be a contiguous floating tensor, got ", describe(x));
        EMBER_CHECK(x.device() == ts[0].device(), op, ": tensor ", i, " is ", describe(x),
                    " but tensor 0 is on ", ts[0].device());
        UpdateList& l = lists[x.dtype()];
        l.param = x.dtype();
        l.slots.push_back({x.data_ptr(), nullptr, nullptr, nullptr, nullptr, nullptr, x.numel()});
    }
    std::vector<UpdateList> out;
    for (auto& [dtype, l] : lists) {
        std::vector<int64_t> numels;
        for (const UpdateSlot& s : l.slots) numels.push_back(s.numel);
        l.chunks = chunk_table(numels);
        out.push_back(std::move(l));
    }
    return out;
}

Device device_of(const std::vector<Tensor>& ts) {
    return ts.empty() || !ts[0].defined() ? Device::cpu() : ts[0].device();
}

// What one update list costs, for the op scope: `per_element` FLOPs per
// parameter element, and the bytes it moves — the parameter and each state
// read and written, the gradient read, the low-precision copy written.
struct UpdateCost {
    double flops = 0, bytes = 0;
};

UpdateCost update_cost(const UpdateList& l, double per_element) {
    UpdateCost c;
    for (const UpdateSlot& s : l.slots) {
        const double n = double(s.numel);
        c.flops += n * per_element;
        c.bytes += n * (2.0 * double(dtype_size(l.param)) + double(dtype_size(l.grad)));
        for (const void* st : {static_cast<const void*>(s.state1), static_cast<const void*>(s.state2),
                               static_cast<const void*>(s.state3)})
            if (st) c.bytes += n * 2.0 * double(dtype_size(l.state));
        if (s.copy) c.bytes += n * double(dtype_size(l.copy));
    }
    return c;
}

// The op scope's view of one update list.
OpCall update_call(const char* op, const UpdateTensors& t, const UpdateList& l, double per_element) {
    const UpdateCost c = update_cost(l, per_element);
    return {op, device_of(t.params), {}, c.flops, c.bytes};
}

}  // namespace

void adam_update(const UpdateTensors& t, const AdamArgs& a, AdamDecay decay, int64_t step) {
    const bool decoupled = decay == AdamDecay::decoupled;
    EMBER_CHECK(step >= 1 || !t.steps.empty(), "adam_update: step must be >= 1, got ", step);
    for (const UpdateList& l : make_lists("adam_update", t, a.amsgrad ? 3 : 2))
        dispatch(update_call("adam_update", t, l, a.amsgrad ? 13 : 12),
                 [&] { cpu::adam_update(l, a, decoupled, step); },
                 [&](auto stream) { cuda::adam_update(l, a, decoupled, step, stream); });
    bump_versions(t);
}

void sgd_update(const UpdateTensors& t, const SgdArgs& a, bool first) {
    const size_t states = a.momentum != 0 ? 1 : 0;
    for (const UpdateList& l : make_lists("sgd_update", t, states))
        dispatch(update_call("sgd_update", t, l, 5),
                 [&] { cpu::sgd_update(l, a, first); },
                 [&](auto stream) { cuda::sgd_update(l, a, first, stream); });
    bump_versions(t);
}

void lamb_update(const UpdateTensors& t, const LambArgs& a, int64_t step) {
    EMBER_CHECK(step >= 1 || !t.steps.empty(), "lamb_update: step must be >= 1, got ", step);
    for (const UpdateList& l : make_lists("lamb_update", t, 2))
        dispatch(update_call("lamb_update", t, l, 20),
                 [&] { cpu::lamb_update(l, a, step); },
                 [&](auto stream) { cuda::lamb_update(l, a, step, stream); });
    bump_versions(t);
}

void lars_update(const UpdateTensors& t, const LarsArgs& a, bool first) {
    for (const UpdateList& l : make_lists("lars_update", t, 1))
        dispatch(update_call("lars_update", t, l, 8),
                 [&] { cpu::lars_update(l, a, first); },
                 [&](auto stream) { cuda::lars_update(l, a, first, stream); });
    bump_versions(t);
}

Tensor global_norm(const std::vector<Tensor>& tensors) {
    const Device d = device_of(tensors);
    bool all_f64 = !tensors.empty();
    for (const Tensor& x : tensors) all_f64 = all_f64 && x.defined() && x.dtype() == DType::f64;
    const std::vector<UpdateList> lists = grad_lists("global_norm", tensors);
    Tensor out = empty({}, {all_f64 ? DType::f64 : DType::f32, d});
    dispatch({"global_norm", d, {&out}},
             [&] {
                 double total = 0;
                 for (const UpdateList& l : lists) total += cpu::sum_squares(l);
                 out.set({}, std::sqrt(total));
             },
             [&](auto stream) { cuda::global_norm(lists, out.data_ptr(), out.dtype(), stream); });
    return out;
}

void clip_by_norm_(const std::vector<Tensor>& tensors, const Tensor& norm, double max_norm) {
    EMBER_CHECK(norm.defined() && norm.numel() == 1 && is_floating(norm.dtype()),
                "clip_by_norm_: norm must be a one-element floating tensor, got ", describe(norm));
    EMBER_CHECK(max_norm > 0, "clip_by_norm_: max_norm must be positive, got ", max_norm);
    const std::vector<UpdateList> lists = grad_lists("clip_by_norm_", tensors);
    if (!lists.empty())
        EMBER_CHECK(norm.device() == device_of(tensors), "clip_by_norm_: norm ", describe(norm),
                    " is not on the tensors' device ", device_of(tensors));
    // The CUDA kernel reads an f32 or f64 norm; f16/bf16 widen exactly.
    const Tensor n = norm.dtype() == DType::f32 || norm.dtype() == DType::f64 || lists.empty()
                         ? norm
                         : norm.to(DType::f32);
    for (const UpdateList& l : lists)
        dispatch({"clip_by_norm_", norm.device(), {&norm}},
                 [&] {
                     const double factor = max_norm / (norm.item() + 1e-6);
                     if (factor < 1) cpu::scale(l, factor, nullptr);
                 },
                 [&](auto stream) {
                     cuda::clip_by_norm_(l, n.data_ptr(), n.dtype(), max_norm, stream);
                 });
    for (const Tensor& x : tensors) x.storage()->bump_version();
}

void unscale_(const std::vector<Tensor>& tensors, const Tensor& inv_scale, const Tensor& found_inf) {
    for (const Tensor* f : {&inv_scale, &found_inf})
        EMBER_CHECK(f->defined() && f->numel() == 1 && f->dtype() == DType::f32 &&
                        f->device() == device_of(tensors),
                    "unscale_: inv_scale and found_inf must be one-element f32 tensors on ",
                    device_of(tensors), ", got ", describe(*f));
    for (const UpdateList& l : grad_lists("unscale_", tensors))
        dispatch({"unscale_", found_inf.device(), {&inv_scale, &found_inf}},
                 [&] { cpu::scale(l, inv_scale.item(), found_inf.data<float>()); },
                 [&](auto stream) {
                     cuda::unscale_(l, inv_scale.data<float>(), found_inf.data<float>(), stream);
                 });
    for (const Tensor& x : tensors) x.storage()->bump_version();
    found_inf.storage()->bump_version();
}

void update_scale_(const Tensor& scale, const Tensor& found_inf, const Tensor& counters,
                   double growth, double backoff, int64_t interval) {
    const Device d = scale.defined() ? scale.device() : Device::cpu();
    for (const Tensor* f : {&scale, &found_inf})
        EMBER_CHECK(f->defined() && f->numel() == 1 && f->dtype() == DType::f32 &&
                        f->is_contiguous() && f->device() == d,
                    "update_scale_: scale and found_inf must be one-element f32 tensors on ", d,
                    ", got ", describe(*f));
    EMBER_CHECK(counters.defined() && counters.numel() == 2 && counters.dtype() == DType::i64 &&
                    counters.is_contiguous() && counters.device() == d,
                "update_scale_: counters must be a two-element i64 tensor on ", d, ", got ",
                describe(counters));
    EMBER_CHECK(interval >= 1, "update_scale_: growth interval must be >= 1, got ", interval);
    dispatch({"update_scale_", d, {&scale, &found_inf, &counters}},
             [&] {
                 cpu::update_scale(scale.data<float>(), found_inf.data<float>(),
                                   counters.data<int64_t>(), growth, backoff, interval);
             },
             [&](auto stream) {
                 cuda::update_scale(scale.data<float>(), found_inf.data<float>(),
                                    counters.data<int64_t>(), growth, backoff, interval, stream);
             });
    for (const Tensor* x : {&scale, &found_inf, &counters}) x->storage()->bump_version();
}

}  // namespace ember::kernels
