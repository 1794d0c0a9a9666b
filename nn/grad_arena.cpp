// GradArena: layout of the slots, the zeroed buffers, and handing each
// parameter its slot.
#include "nn/grad_arena.h"

#include "autograd/accumulate.h"
#include "kernels/copy.h"
#include "kernels/factories.h"

namespace ember::nn {

namespace {

int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// Slot alignment in elements (dtype sizes are powers of two up to 8, so this divides exactly).
int64_t alignment_of(DType dtype) { return kGradArenaAlignment / dtype_size(dtype); }

}  // namespace

Tensor GradGroup::view(const GradSlot& slot) const {
    const Shape& shape = slot.param.shape();
    EMBER_CHECK(shape_numel(shape) == slot.numel, "GradArena: parameter '", slot.name, "' is now ",
                shape_str(shape), " but its slot holds ", slot.numel,
                " elements; call flatten_grads again");
    return make_tensor(buffer.storage(), shape, contiguous_strides(shape), slot.offset, dtype);
}

GradArena::GradArena(const NamedTensors& params) {
    for (const auto& [name, p] : params) {
        if (!p.requires_grad()) continue;
        GradGroup* group = nullptr;
        for (GradGroup& g : groups_)
            if (g.dtype == p.dtype() && g.device == p.device()) group = &g;
        if (!group) {
            groups_.push_back({p.dtype(), p.device(), Tensor(), {}});
            group = &groups_.back();
        }
        const int64_t end =
            group->slots.empty() ? 0 : group->slots.back().offset + group->slots.back().numel;
        group->slots.push_back({name, p, round_up(end, alignment_of(p.dtype())), p.numel()});
    }
    for (GradGroup& g : groups_) {
        const GradSlot& last = g.slots.back();
        // The tail is padded too: a vector loop over the last slot may read a full line.
        g.buffer =
            zeros({round_up(last.offset + last.numel, alignment_of(g.dtype))}, {g.dtype, g.device});
        for (const GradSlot& s : g.slots) autograd::set_grad_slot(s.param, g.view(s));
    }
}

const GradGroup* GradArena::group(DType dtype, Device device) const {
    for (const GradGroup& g : groups_)
        if (g.dtype == dtype && g.device == device) return &g;
    return nullptr;
}

void GradArena::zero() const {
    for (const GradGroup& g : groups_) kernels::fill(g.buffer, 0);
}

bool GradArena::holds(const Tensor& t) const {
    if (!t.defined()) return false;
    for (const GradGroup& g : groups_)
        if (g.buffer.storage() == t.storage()) return true;
    return false;
}

}  // namespace ember::nn
