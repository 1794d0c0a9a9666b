// A leaf's accumulate node and the rule by which it adds a gradient into
// grad(): in place when that cannot surprise anyone, or into the leaf's slot.
#include "autograd/accumulate.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "autograd/graph.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"

namespace ember::autograd {

// Note [Gradient accumulation]
// A leaf's accumulate node adds each gradient g that reaches it into grad():
// - No gradient yet. With a slot that fits g, g is copied into the slot and
//   grad() is a view of it. Otherwise g is taken as is when nothing else can
//   see it (the engine's handle and the closure's, or the closure's alone after
//   a hook replaced it), else a copy is kept: grad() never shares storage with
//   a tensor someone else holds.
// - A gradient already, grad mode off, same shape, dtype and device as g: g is
//   added in place (storage, data pointer and strides stay; the storage
//   version is bumped, so a graph that saved the gradient notices) when the
//   gradient is the leaf's slot, or when it is private: its TensorImpl is held
//   by the leaf alone (no handle from grad() is alive), its storage by that
//   TensorImpl alone (no view, detach() or saved copy of it), and its elements
//   do not overlap.
// - Otherwise out of place: grad() becomes a new tensor grad + g, so a
//   gradient the user holds is never changed behind their back.
// The engine runs every backward with grad mode off; the check is there so
// that a mode that records the backward (create_graph) would get a sum it can
// differentiate. PyTorch's AccumulateGrad adds in place whenever grad mode is
// off, even into a .grad the user holds; ember keeps its promise instead,
// except for a slot: a slot exists so that the gradient stays put, and every
// view of it (an arena's buffer, a bucket view, a held grad()) sees the sum.

namespace {

// True when `g` is a dense tensor in `format` (the leaf's) that nobody but
// `holders` handles refers to: storing it cannot alias anything.
bool owned_dense(const Tensor& g, long holders, MemoryFormat format) {
    return g.shared_impl().use_count() <= holders && g.storage().use_count() == 1 &&
           g.offset() == 0 && g.is_contiguous(format) &&
           g.storage()->nbytes() == size_t(g.numel() * g.element_size());
}

// True when t's elements sit at distinct addresses with no gaps, in any dim
// order (a permuted contiguous layout): an in-place add touches each once.
bool non_overlapping_dense(const Tensor& t) {
    if (t.is_contiguous()) return true;
    std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dims that move
    for (int64_t d = 0; d < t.dim(); ++d)
        if (t.size(d) != 1) dims.emplace_back(t.stride(d), t.size(d));
    std::sort(dims.begin(), dims.end());
    int64_t expected = 1;
    for (const auto& [stride, size] : dims) {
        if (stride != expected) return false;
        expected *= size;
    }
    return true;
}

bool same_geometry(const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && a.dtype() == b.dtype() && a.device() == b.device();
}

bool is_slot(const AutogradMeta& m) {
    const Tensor& g = m.grad;
    const Tensor& s = m.grad_slot;
    return g.defined() && s.defined() && g.storage() == s.storage() && g.offset() == s.offset() &&
           g.shape() == s.shape() && g.strides() == s.strides() && g.dtype() == s.dtype();
}

// Note [Gradient accumulation]; m.mutex is held. A new gradient is laid out
// in `format`, the leaf's: contiguous, or channels-last for a channels-last
// leaf (as PyTorch's gradient layout contract).
void accumulate_into(AutogradMeta& m, const Tensor& g, long holders, MemoryFormat format) {
    if (!m.grad.defined()) {
        if (m.grad_slot.defined() && same_geometry(m.grad_slot, g)) {
            kernels::copy(m.grad_slot, g);
            m.grad = m.grad_slot.detach();  // its own handle: the slot is never handed out
        } else {
            // A copy through Tensor's methods: recorded under create_graph.
            m.grad = owned_dense(g, holders, format)   ? g
                     : format == MemoryFormat::contiguous ? g.clone()
                                                         : g.clone().contiguous(format);
        }
        return;
    }
    const bool in_place =
        !GradMode::is_enabled() && same_geometry(m.grad, g) &&
        (is_slot(m) || (m.grad.shared_impl().use_count() == 1 &&
                        m.grad.storage().use_count() == 1 && non_overlapping_dense(m.grad)));
    if (in_place)
        kernels::add_(m.grad, g);
    else
        m.grad = kernels::add(m.grad, g);
}

}  // namespace

void set_grad_slot(const Tensor& leaf, const Tensor& slot) {
    EMBER_CHECK(leaf.defined() && leaf.is_leaf(), "set_grad_slot: expected a leaf tensor");
    if (slot.defined()) {
        EMBER_CHECK(leaf.requires_grad(), "set_grad_slot: the leaf ", shape_str(leaf.shape()),
                    " does not require grad");
        EMBER_CHECK(same_geometry(slot, leaf) && non_overlapping_dense(slot),
                    "set_grad_slot: the slot ", dtype_name(slot.dtype()), " ",
                    shape_str(slot.shape()), " on ", slot.device(),
                    " must be a dense tensor like the leaf, ", dtype_name(leaf.dtype()), " ",
                    shape_str(leaf.shape()), " on ", leaf.device());
    }
    const auto& meta = leaf.unsafe_impl()->autograd;
    if (!meta) return;  // no slot to forget (a leaf that requires grad has a meta)
    std::lock_guard<std::mutex> lock(meta->mutex);
    meta->grad_slot = slot.defined() ? slot.detach() : Tensor();
    if (!slot.defined() || !meta->grad.defined() || is_slot(*meta)) return;
    kernels::copy(meta->grad_slot, meta->grad);
    meta->grad = meta->grad_slot.detach();
}

Tensor grad_slot(const Tensor& leaf) {
    const auto& meta = leaf.unsafe_impl() ? leaf.unsafe_impl()->autograd : nullptr;
    if (!meta) return {};
    std::lock_guard<std::mutex> lock(meta->mutex);
    return meta->grad_slot.defined() ? meta->grad_slot.detach() : Tensor();
}

bool grad_in_slot(const Tensor& leaf) {
    const auto& meta = leaf.unsafe_impl() ? leaf.unsafe_impl()->autograd : nullptr;
    if (!meta) return false;
    std::lock_guard<std::mutex> lock(meta->mutex);
    return is_slot(*meta);
}

// The accumulate node of a leaf, shared by every graph that uses the leaf
// while one exists (the meta holds it weakly, so no cycle).
std::shared_ptr<Node> accumulator_of(const Tensor& leaf) {
    const std::shared_ptr<AutogradMeta>& meta = leaf.unsafe_impl()->autograd;
    std::lock_guard<std::mutex> lock(meta->mutex);
    if (auto node = meta->accumulator.lock()) return node;
    auto node = std::make_shared<Node>();
    node->name = "accumulate_grad";
    node->sequence_nr = std::numeric_limits<uint64_t>::max();  // run as soon as ready
    node->is_accumulator = true;
    node->outputs.push_back(TensorGeometry::of(leaf));
    node->output_hooks.resize(1);
    std::weak_ptr<AutogradMeta> weak = meta;
    node->backward = [weak,
                      geometry = TensorGeometry::of(leaf)](const TensorList& grads) -> TensorList {
        auto m = weak.lock();
        if (!m || !m->requires_grad) return {};  // the leaf is gone or was turned off
        Tensor g = grads[0];
        if (!g.defined()) return {};
        // The leaf may have moved since the graph was recorded (Module::to):
        // its gradient follows its current dtype and device.
        TensorGeometry want = geometry;
        MemoryFormat format = MemoryFormat::contiguous;
        if (auto impl = m->self.lock()) {
            const Tensor now(impl);
            want = TensorGeometry::of(now);
            format = now.suggest_memory_format();
            if (g.dtype() != now.dtype()) g = kernels::cast(g, now.dtype(), format);
            if (g.device() != now.device()) g = g.to(now.device());
        }
        bool replaced = false;
        for (const GradHook& hook : m->hooks) {
            Tensor r = run_hook(hook, g, want);
            replaced = replaced || !r.is_same(g);
            g = r;
        }
        {
            // g's holders: the engine's list and g, or g alone once a hook replaced it.
            std::lock_guard<std::mutex> lock(m->mutex);
            accumulate_into(*m, g, replaced ? 1 : 2, format);
        }
        if (!m->post_accumulate_hooks.empty()) {
            if (auto impl = m->self.lock()) {
                const Tensor leaf_again(impl);
                for (auto& hook : m->post_accumulate_hooks) hook(leaf_again);
            }
        }
        return {};
    };
    meta->accumulator = node;
    return node;
}

}  // namespace ember::autograd
