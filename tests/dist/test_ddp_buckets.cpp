// DDP's bucket layout (Note [DDP buckets] in dist/ddp.cpp): reverse
// registration order at first; after the first backward, the order rank 0's
// gradients actually arrived in, on every rank, even where a rank's own
// backward ran in another order. The reference order comes from hooks on a
// plain copy of rank 0's model, not from DDP.
#include "support/dist_comm.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

// Three square layers registered as a, b, c and applied in a per-rank order
// (rank 0: c, a, b), so the order gradients arrive in differs from the
// registration order, its reverse, and between ranks.
class Permuted : public nn::Module {
  public:
    Permuted(int rank, uint64_t seed) {
        manual_seed(seed);  // the same weights whatever the order
        layers_ = {register_module("a", nn::Linear(4, 4)), register_module("b", nn::Linear(4, 4)),
                   register_module("c", nn::Linear(4, 4))};
        const int orders[3][3] = {{2, 0, 1}, {1, 2, 0}, {0, 2, 1}};
        for (int k : orders[rank % 3]) order_.push_back(layers_[size_t(k)]);
    }
    Tensor forward(const Tensor& x) override {
        Tensor h = x;
        for (auto& layer : order_) h = tanh((*layer)(h));
        return h;
    }

  private:
    std::vector<std::shared_ptr<nn::Linear>> layers_, order_;
};

Tensor batch_of(int rank, uint64_t step) {
    return random_tensor({5, 4}, DType::f32, 77 * step + uint64_t(rank));
}

Tensor loss_of(const Tensor& y) { return sum(mul(y, y)); }

// The parameters in the order their gradients land in one backward of
// rank `rank`'s model, recorded by hooks of our own.
std::vector<std::string> arrival_order(int rank) {
    Permuted m(rank, 5);
    auto order = std::make_shared<std::vector<std::string>>();
    for (auto& [name, p] : m.named_parameters())
        p.register_post_accumulate_grad_hook([order, name = name](const Tensor&) {
            order->push_back(name);
        });
    loss_of(m(batch_of(rank, 0))).backward();
    return *order;
}

std::vector<std::string> layout_of(const dist::DistributedDataParallel& ddp) {
    std::vector<std::string> out;
    for (const dist::BucketInfo& b : ddp.buckets())
        for (const std::string& p : b.params) out.push_back(p);
    return out;
}

}  // namespace

TEST_CASE("DDP re-lays the buckets out in rank 0's observed order after the first step",
          "[dist][ddp]") {
    dist::Communicator& w = world();
    auto comm = std::shared_ptr<dist::Communicator>(&w, [](dist::Communicator*) {});
    const int me = w.rank();
    auto model = std::make_shared<Permuted>(me, 5);
    dist::DistributedDataParallel ddp(model, comm, {.bucket_bytes = 1});  // a bucket each
    REQUIRE(ddp.buckets().size() == 6);
    const std::vector<std::string> reverse = {"c.bias", "c.weight", "b.bias",
                                              "b.weight", "a.bias", "a.weight"};
    CHECK(layout_of(ddp) == reverse);

    const std::vector<std::string> rank0 = arrival_order(0);
    REQUIRE(rank0.size() == 6);
    REQUIRE(rank0 != reverse);  // or the re-layout would not show
    if (w.size() > 1) REQUIRE(arrival_order(1) != rank0);

    loss_of(ddp(batch_of(me, 0))).backward();
    CHECK(layout_of(ddp) == rank0);

    // The same on every rank: each rank's layout as indices, gathered.
    const auto named = model->named_parameters();
    Tensor mine = empty({6}, {.dtype = DType::i64});
    const std::vector<std::string> layout = layout_of(ddp);
    for (size_t k = 0; k < 6; ++k)
        for (size_t i = 0; i < named.size(); ++i)
            if (named[i].first == layout[k]) mine.data<int64_t>()[k] = int64_t(i);
    Tensor all = empty({6 * w.size()}, {.dtype = DType::i64});
    w.all_gather(all, mine);
    for (int r = 0; r < w.size(); ++r) {
        INFO("rank " << r << "'s layout against this rank's");
        check_close(all.narrow(0, 6 * r, 6), values(mine), 0, 0);
    }

    // The next backward lands in the new layout: the gradients are the
    // average over the ranks' models, and the layout stays put.
    model->zero_grad();
    loss_of(ddp(batch_of(me, 1))).backward();
    CHECK(layout_of(ddp) == rank0);
    CHECK(ddp.syncs() == 2);
    std::vector<std::vector<double>> want(named.size());
    for (int r = 0; r < w.size(); ++r) {
        Permuted ref(r, 5);
        loss_of(ref(batch_of(r, 1))).backward();
        const auto ref_named = ref.named_parameters();
        for (size_t i = 0; i < named.size(); ++i) {
            const std::vector<double> g = values(ref_named[i].second.grad());
            want[i].resize(g.size(), 0.0);
            for (size_t j = 0; j < g.size(); ++j) want[i][j] += g[j] / w.size();
        }
    }
    for (size_t i = 0; i < named.size(); ++i) {
        INFO("gradient of " << named[i].first);
        check_close(named[i].second.grad(), want[i], 1e-5, 1e-6);
    }
}
