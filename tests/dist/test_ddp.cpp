// DistributedDataParallel against one process doing the whole batch: W ranks
// of B rows each must end where one model trained on the W·B rows ends (f32
// rounding apart). Every rank also trains that reference itself, on the same
// seeded data, so each can compare.
#include "support/dist_comm.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

constexpr int64_t kRows = 6;  // per rank

std::shared_ptr<nn::Module> small_model(uint64_t seed) {
    manual_seed(seed);
    return std::make_shared<nn::Sequential>(nn::Linear(10, 32), nn::ReLU(), nn::Linear(32, 16),
                                            nn::ReLU(), nn::Linear(16, 4));
}

struct Batch {
    Tensor x, y;  // the whole batch: world × kRows rows
};
Batch global_batch(int world, uint64_t step) {
    return {random_tensor({world * kRows, 10}, DType::f32, 50 + step),
            random_tensor({world * kRows}, DType::i64, 90 + step, 0, 4)};
}

Tensor rows_of(const Tensor& t, int rank) { return t.narrow(0, rank * kRows, kRows); }

std::vector<Tensor> params_of(nn::Module& m) {
    std::vector<Tensor> out;
    for (auto& np : m.named_parameters()) out.push_back(np.second);
    return out;
}

void check_same_params(nn::Module& a, nn::Module& b) {
    const auto pa = a.named_parameters(), pb = b.named_parameters();
    REQUIRE(pa.size() == pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
        INFO("parameter " << pa[i].first);
        check_close(pa[i].second, pb[i].second, 1e-5, 1e-6);
    }
}

}  // namespace

TEST_CASE("DDP over W ranks equals one process over the whole batch", "[dist][ddp]") {
    dist::Communicator& w = world();
    auto comm = std::shared_ptr<dist::Communicator>(&w, [](dist::Communicator*) {});
    // Different seeds: the constructor's broadcast must make them rank 0's.
    auto model = small_model(7 + uint64_t(w.rank()));
    auto reference = small_model(7);
    dist::DistributedDataParallel ddp(model, comm, {.bucket_bytes = 256});
    check_same_params(*model, *reference);
    CHECK(ddp.buckets().size() > 2);  // small buckets: several all-reduces per step

    optim::SGD opt(params_of(*model), {.lr = 0.1, .momentum = 0.9});
    optim::SGD ref_opt(params_of(*reference), {.lr = 0.1, .momentum = 0.9});
    for (uint64_t step = 0; step < 4; ++step) {
        const Batch b = global_batch(w.size(), step);
        cross_entropy(ddp(rows_of(b.x, w.rank())), rows_of(b.y, w.rank())).backward();
        opt.step();
        opt.zero_grad();
        cross_entropy((*reference)(b.x), b.y).backward();
        ref_opt.step();
        ref_opt.zero_grad();
        INFO("after step " << step);
        check_same_params(*model, *reference);
    }
    CHECK(ddp.syncs() == 4);
    // After the first backward the buckets follow the order gradients came in.
    size_t in_buckets = 0;
    for (const dist::BucketInfo& bucket : ddp.buckets()) in_buckets += bucket.params.size();
    CHECK(in_buckets == 6);
}

TEST_CASE("DDP no_sync: accumulated micro-batches reduce once, to the same result",
          "[dist][ddp]") {
    dist::Communicator& w = world();
    auto comm = std::shared_ptr<dist::Communicator>(&w, [](dist::Communicator*) {});
    auto model = small_model(11);
    auto reference = small_model(11);
    dist::DistributedDataParallel ddp(model, comm);
    const Batch first = global_batch(w.size(), 10), second = global_batch(w.size(), 11);
    {
        auto guard = ddp.no_sync();
        cross_entropy(ddp(rows_of(first.x, w.rank())), rows_of(first.y, w.rank())).backward();
    }
    CHECK(ddp.syncs() == 0);
    cross_entropy(ddp(rows_of(second.x, w.rank())), rows_of(second.y, w.rank())).backward();
    CHECK(ddp.syncs() == 1);
    cross_entropy((*reference)(first.x), first.y).backward();
    cross_entropy((*reference)(second.x), second.y).backward();
    const auto pm = model->named_parameters(), pr = reference->named_parameters();
    for (size_t i = 0; i < pm.size(); ++i) {
        INFO("gradient of " << pm[i].first);
        check_close(pm[i].second.grad(), pr[i].second.grad(), 1e-5, 1e-6);
    }
}

TEST_CASE("DDP names the parameters that received no gradient", "[dist][ddp]") {
    dist::Communicator& w = world();
    auto comm = std::shared_ptr<dist::Communicator>(&w, [](dist::Communicator*) {});
    manual_seed(3);
    auto used = std::make_shared<nn::Linear>(4, 2);
    auto unused = std::make_shared<nn::Linear>(2, 2);
    auto model = std::make_shared<nn::Sequential>(used, unused);
    dist::DistributedDataParallel ddp(model, comm);
    const Tensor x = random_tensor({3, 4}, DType::f32, 5);
    // Only the first layer takes part in the loss.
    REQUIRE_THROWS_WITH_MSG(sum((*used)(x)).backward(), "received no gradient in this backward: 1.weight, 1.bias");
    // The state was reset: a backward that uses everything works afterwards.
    sum(ddp(x)).backward();
    CHECK(ddp.syncs() == 1);
}

TEST_CASE("DDP refuses a missing module or communicator and bad buckets", "[dist][ddp]") {
    auto comm = std::shared_ptr<dist::Communicator>(&world(), [](dist::Communicator*) {});
    REQUIRE_THROWS_WITH_MSG(dist::DistributedDataParallel(nullptr, comm), "a module and a communicator");
    REQUIRE_THROWS_WITH_MSG(dist::DistributedDataParallel(small_model(1), comm, {.bucket_bytes = 0}),
                            "bucket_bytes must be positive");
}
