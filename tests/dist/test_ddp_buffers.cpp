// DistributedDataParallel and batch norm's buffers (docs/dist.md, "Buffers"):
// the constructor makes every rank's parameters and buffers rank 0's; each
// training-mode forward first broadcasts rank 0's buffers, then updates them
// from this rank's own batch; evaluation mode broadcasts nothing. Every rank
// replays rank 0's part on a plain BatchNorm2d, so each knows what to expect.
#include "support/dist_comm.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

constexpr int64_t kChannels = 3;

struct BnModel {
    std::shared_ptr<nn::BatchNorm2d> bn;
    std::shared_ptr<nn::Sequential> model;
};

// BatchNorm2d → Flatten → Linear with parameters and buffers from `seed`.
BnModel bn_model(uint64_t seed) {
    manual_seed(seed);
    auto bn = std::make_shared<nn::BatchNorm2d>(kChannels);
    auto model = std::make_shared<nn::Sequential>(bn, nn::Flatten(), nn::Linear(kChannels * 4, 2));
    NoGradGuard no_grad;
    bn->running_mean.copy_(random_tensor({kChannels}, DType::f32, 300 + seed));
    bn->running_var.copy_(random_tensor({kChannels}, DType::f32, 400 + seed, 0.5, 2.0));
    bn->num_batches_tracked.fill_(double(seed));
    return {bn, model};
}

// A rank's training batch of step `step`.
Tensor batch_of(int rank, uint64_t step) {
    return random_tensor({4, kChannels, 2, 2}, DType::f32, 1000 * step + uint64_t(rank), -3, 3);
}

void copy_buffers(nn::BatchNorm2d& dst, const nn::BatchNorm2d& src) {
    NoGradGuard no_grad;
    dst.running_mean.copy_(src.running_mean);
    dst.running_var.copy_(src.running_var);
    dst.num_batches_tracked.copy_(src.num_batches_tracked);
}

void check_buffers(const nn::BatchNorm2d& got, const nn::BatchNorm2d& want) {
    check_close(got.running_mean, want.running_mean, 1e-6, 1e-7);
    check_close(got.running_var, want.running_var, 1e-6, 1e-7);
    check_close(got.num_batches_tracked, want.num_batches_tracked, 0, 0);
}

}  // namespace

TEST_CASE("DDP with batch norm: rank 0's buffers at construction and before each "
          "training forward", "[dist][ddp]") {
    dist::Communicator& w = world();
    auto comm = std::shared_ptr<dist::Communicator>(&w, [](dist::Communicator*) {});
    const int me = w.rank();
    // Different seeds per rank: parameters and buffers all differ before.
    BnModel mine = bn_model(10 + uint64_t(me));
    const BnModel rank0 = bn_model(10);
    dist::DistributedDataParallel ddp(mine.model, comm);
    {
        INFO("after construction");
        check_buffers(*mine.bn, *rank0.bn);
        const auto pm = mine.model->named_parameters(), p0 = rank0.model->named_parameters();
        for (size_t i = 0; i < pm.size(); ++i) check_close(pm[i].second, p0[i].second, 0, 0);
    }

    // The reference: a plain batch norm that starts from rank 0's buffers.
    // Rank 0's own history (its batches) and this rank's view of it.
    nn::BatchNorm2d rank0_bn(kChannels), expected(kChannels);
    copy_buffers(rank0_bn, *rank0.bn);
    copy_buffers(expected, *rank0.bn);

    // Step 1: rank 0's buffers (already everyone's), then this rank's batch.
    ddp(batch_of(me, 1));
    expected.forward(batch_of(me, 1));
    rank0_bn.forward(batch_of(0, 1));
    {
        INFO("after the first training forward: rank 0's buffers updated by this rank's batch");
        check_buffers(*mine.bn, expected);
    }
    if (w.size() > 1 && me != 0) {
        // The ranks really did see different batches (otherwise this test
        // could not tell a broadcast from none).
        CHECK(values(mine.bn->running_mean) != values(rank0_bn.running_mean));
    }

    // Step 2: the forward broadcasts rank 0's step-1 buffers first, so this
    // rank's own step-1 update is gone.
    ddp(batch_of(me, 2));
    copy_buffers(expected, rank0_bn);
    expected.forward(batch_of(me, 2));
    rank0_bn.forward(batch_of(0, 2));
    {
        INFO("after the second training forward");
        check_buffers(*mine.bn, expected);
        CHECK(mine.bn->num_batches_tracked.item() == rank0.bn->num_batches_tracked.item() + 2);
    }

    // Evaluation mode broadcasts nothing and updates nothing: each rank keeps
    // its own statistics until sync_buffers() (or the next training forward).
    mine.model->eval();
    ddp(batch_of(me, 3));
    {
        INFO("after an evaluation forward");
        check_buffers(*mine.bn, expected);
    }
    ddp.sync_buffers();
    {
        INFO("after sync_buffers");
        check_buffers(*mine.bn, rank0_bn);
    }
}
