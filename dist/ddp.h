// DistributedDataParallel: the same model on every rank, each rank a
// different part of the batch, and gradients averaged across ranks while
// backward still runs. Gradients live in a flat arena laid out in buckets
// (about 25 MB, in the order backward produces them); a bucket's all-reduce
// starts from the gradient hooks as soon as its last gradient lands, and the
// end of backward waits for all of them. Guide: docs/dist.md.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "communicator.h"
#include "../nn/module.h"

namespace ember::dist {

struct DdpOptions {
    /// Bytes of gradient per bucket (the last bucket of a dtype may be smaller).
    int64_t bucket_bytes = int64_t(25) << 20;
    /// Broadcast rank 0's buffers (batch norm's running statistics) to every
    /// rank before each forward in training mode, as PyTorch does, so that
    /// evaluation on any rank sees the same statistics.
    bool broadcast_buffers = true;
};

/// One bucket: a contiguous slice of a gradient buffer of the arena.
struct BucketInfo {
    DType dtype = DType::f32;
    int64_t numel = 0;                ///< elements, padding included
    std::vector<std::string> params;  ///< in the slice's order
};

class DistributedDataParallel {
  public:
    /// Wraps `module` (on the CPU for the MPI backend): broadcasts rank 0's
    /// parameters and buffers to every rank, lays the gradients out in
    /// buckets (reverse registration order at first, the order observed in
    /// the first backward after that) and hooks every parameter that
    /// requires grad.
    DistributedDataParallel(std::shared_ptr<nn::Module> module,
                            std::shared_ptr<Communicator> comm, DdpOptions options = {});
    ~DistributedDataParallel();
    DistributedDataParallel(const DistributedDataParallel&) = delete;
    DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

    /// The module's forward (after sync_buffers in training mode).
    Tensor forward(const Tensor& x);
    /// Rank 0's buffers to every rank (when DdpOptions::broadcast_buffers is
    /// on and there is more than one rank); forward does it before each
    /// training-mode forward, and a caller that runs the module itself (in
    /// checkpointed segments, say) calls it first.
    void sync_buffers();
    Tensor operator()(const Tensor& x) { return forward(x); }

    nn::Module& module() { return *module_; }
    std::shared_ptr<nn::Module> module_ptr() const { return module_; }
    Communicator& communicator() { return *comm_; }

    /// While a guard lives, backward accumulates gradients locally without
    /// any all-reduce (docs/tips.md #17): use it for every micro-batch but the last
    /// of an accumulated step, whose backward then reduces the sum.
    class NoSync {
      public:
        explicit NoSync(DistributedDataParallel& ddp);
        ~NoSync();
        NoSync(const NoSync&) = delete;
        NoSync& operator=(const NoSync&) = delete;

      private:
        DistributedDataParallel& ddp_;
        bool was_;
    };
    NoSync no_sync() { return NoSync(*this); }

    /// The buckets as they are now (rebuilt once, after the first backward).
    std::vector<BucketInfo> buckets() const;
    /// Backward passes that reduced gradients so far.
    int64_t syncs() const;

    struct State;  // shared with the hooks (dist/ddp.cpp)

  private:
    std::shared_ptr<nn::Module> module_;
    std::shared_ptr<Communicator> comm_;
    DdpOptions options_;
    std::shared_ptr<State> state_;
};

}  // namespace ember::dist
