// GradArena: the gradients of a model's parameters as views of one flat
// buffer per (dtype, device), so that they stay put from step to step. A fused
// multi-tensor optimizer walks a whole buffer in one pass; data parallelism
// all-reduces slices of it (bucket views) without copies. Module::flatten_grads
// makes one; docs/nn.md describes the life cycle.
#pragma once

#include <string>
#include <vector>

#include "module.h"

namespace ember::nn {

/// Byte alignment of every slot's first element within its buffer: a cache
/// line, enough for any vector load (buffers themselves are allocated at
/// least this aligned on every device).
inline constexpr int64_t kGradArenaAlignment = 64;

/// One parameter's place in its group's buffer.
struct GradSlot {
    std::string name;  ///< dotted parameter name
    Tensor param;      ///< the parameter (a handle shared with the module)
    /// First element in the buffer; offset * element size is a multiple of
    /// kGradArenaAlignment.
    int64_t offset = 0;
    /// Elements: the gradient is buffer[offset, offset + numel), row-major.
    int64_t numel = 0;
};

/// The gradients of all parameters of one dtype on one device.
struct GradGroup {
    DType dtype = DType::f32;
    Device device = Device::cpu();
    /// 1-d and contiguous: the slots in order, zero padding between them and
    /// after the last up to the alignment.
    Tensor buffer;
    std::vector<GradSlot> slots;  ///< parameter order, increasing offsets
    /// The slot's gradient view of the buffer: the parameter's shape, contiguous.
    Tensor view(const GradSlot& slot) const;
};

/// Flat gradient buffers for a list of parameters. Building one gives each
/// parameter that requires grad a slot (autograd::set_grad_slot): a gradient
/// it already has is copied in, and from then on its grad() stays a view of
/// the slot (Note [Gradient accumulation] in autograd/accumulate.cpp). The
/// buffers start zeroed. A parameter has at most one slot: the last arena
/// built over it wins.
class GradArena {
public:
    /// Lays out `params` (those that require grad) by (dtype, device) in
    /// first-seen order and gives each its slot.
    explicit GradArena(const NamedTensors& params);

    const std::vector<GradGroup>& groups() const { return groups_; }
    /// The group of `dtype` on `device`, or null.
    const GradGroup* group(DType dtype, Device device) const;
    /// Zeroes every buffer, one fill each.
    void zero() const;
    /// True when `t` lies in one of the buffers (shares its storage).
    bool holds(const Tensor& t) const;

private:
    std::vector<GradGroup> groups_;
};

}  // namespace ember::nn
