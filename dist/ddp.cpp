// DistributedDataParallel: buckets over a gradient arena, all-reduces started
// from the post-accumulate hooks in bucket order, and the end of backward
// (autograd::queue_callback) waiting for them.
#include "dist/ddp.h"

#include <unordered_map>

#include "autograd/graph.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "kernels/factories.h"
#include "kernels/profile.h"
#include "nn/grad_arena.h"

namespace ember::dist {

// Note [DDP buckets]
// Every rank must start the same all-reduces in the same order, so buckets
// are launched strictly in index order: bucket k starts once its last
// gradient has landed and buckets 0..k-1 have started. The first layout is
// reverse registration order (a model's last layers get their gradients
// first); the first backward records the order the gradients really arrive
// in, rank 0's record is broadcast, and the arena is laid out once more in
// that order. A gradient that never arrives (a parameter the loss did not
// use) would stall its bucket forever: the end of backward names those
// parameters instead.
struct DistributedDataParallel::State {
    struct Bucket {
        size_t group = 0;  // in the arena
        int64_t begin = 0, end = 0;
        std::vector<size_t> params;
        int pending = 0;
        std::unique_ptr<Work> work;
    };

    std::shared_ptr<Communicator> comm;
    int64_t bucket_bytes = 0;
    nn::NamedTensors params;  // those that require grad, registration order
    std::unique_ptr<nn::GradArena> arena;
    std::vector<Bucket> buckets;
    std::vector<size_t> bucket_of;  // per parameter
    std::vector<bool> ready;        // per parameter, this backward
    std::vector<int64_t> observed;  // arrival order in the first backward
    size_t next_launch = 0;
    bool callback_queued = false;
    bool sync = true;
    bool relaid = false;
    int64_t syncs = 0;

    void layout(const std::vector<size_t>& order) {
        std::unordered_map<std::string, size_t> index;
        nn::NamedTensors ordered;
        for (size_t i : order) {
            ordered.push_back(params[i]);
            index[params[i].first] = i;
        }
        arena = std::make_unique<nn::GradArena>(ordered);
        buckets.clear();
        bucket_of.assign(params.size(), 0);
        const auto& groups = arena->groups();
        for (size_t g = 0; g < groups.size(); ++g) {
            const nn::GradGroup& group = groups[g];
            const int64_t elem = dtype_size(group.dtype);
            for (size_t s = 0; s < group.slots.size(); ++s) {
                const nn::GradSlot& slot = group.slots[s];
                if (buckets.empty() || buckets.back().group != g ||
                    (buckets.back().end - buckets.back().begin) * elem >= bucket_bytes) {
                    if (!buckets.empty() && buckets.back().group == g)
                        buckets.back().end = slot.offset;
                    buckets.push_back({g, slot.offset, slot.offset, {}, 0, nullptr});
                }
                Bucket& b = buckets.back();
                b.end = slot.offset + slot.numel;
                b.params.push_back(index.at(slot.name));
                bucket_of[index.at(slot.name)] = buckets.size() - 1;
            }
            if (!buckets.empty() && buckets.back().group == g)
                buckets.back().end = group.buffer.numel();  // the padding after the last slot
        }
        reset();
    }

    void reset() {
        for (Bucket& b : buckets) {
            b.pending = int(b.params.size());
            b.work.reset();
        }
        ready.assign(params.size(), false);
        next_launch = 0;
        callback_queued = false;
    }

    Tensor bucket_view(const Bucket& b) const {
        return arena->groups()[b.group].buffer.narrow(0, b.begin, b.end - b.begin);
    }

    void on_grad(size_t i, const std::weak_ptr<State>& self) {
        if (!sync) return;
        if (!callback_queued) {
            callback_queued = true;
            autograd::queue_callback([self] {
                if (auto s = self.lock()) s->finish();
            });
        }
        if (ready[i]) return;
        ready[i] = true;
        // MPI moves data only inside its calls: poll the buckets in flight.
        for (size_t k = 0; k < next_launch; ++k)
            if (buckets[k].work) buckets[k].work->done();
        if (!relaid) observed.push_back(int64_t(i));
        --buckets[bucket_of[i]].pending;
        while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
            Bucket& b = buckets[next_launch];
            const kernels::ProfileRange range("comm", "all_reduce launch");
            b.work = comm->all_reduce_async(bucket_view(b), ReduceOp::average,
                                            str("bucket ", next_launch));
            ++next_launch;
        }
    }

    // The end of a backward that reduces: wait for every bucket.
    void finish() {
        {
            const kernels::ProfileRange range("comm", "all_reduce wait: every bucket");
            for (Bucket& b : buckets)
                if (b.work) b.work->wait();
        }
        if (next_launch < buckets.size()) {
            std::string missing;
            size_t count = 0;
            for (size_t i = 0; i < params.size(); ++i)
                if (!ready[i] && count++ < 20)
                    missing += (missing.empty() ? "" : ", ") + params[i].first;
            reset();
            EMBER_FAIL("DistributedDataParallel: ", count, " parameter(s) received no gradient "
                       "in this backward: ", missing, count > 20 ? ", ..." : "",
                       ". Every parameter that requires grad must take part in the loss on "
                       "every rank (or set requires_grad off for those left out)");
        }
        ++syncs;
        if (!relaid) relayout();
        reset();
    }

    // Once, after the first backward: rank 0's arrival order for everyone.
    void relayout() {
        relaid = true;
        Tensor order = empty({int64_t(params.size())}, {.dtype = DType::i64});
        for (size_t k = 0; k < params.size(); ++k)
            order.data<int64_t>()[k] = k < observed.size() ? observed[k] : int64_t(k);
        comm->broadcast(order, 0, "DDP bucket order");
        std::vector<size_t> o(params.size());
        for (size_t k = 0; k < o.size(); ++k) o[k] = size_t(order.data<int64_t>()[k]);
        observed.clear();
        layout(o);
    }
};

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 std::shared_ptr<Communicator> comm,
                                                 DdpOptions options)
    : module_(std::move(module)), comm_(std::move(comm)), options_(options) {
    EMBER_CHECK(module_ && comm_, "DistributedDataParallel: a module and a communicator are needed");
    EMBER_CHECK(options_.bucket_bytes > 0, "DistributedDataParallel: bucket_bytes must be "
                "positive, got ", options_.bucket_bytes);
    {
        NoGradGuard no_grad;  // the broadcasts write into leaves
        for (auto& [name, p] : module_->named_parameters()) comm_->broadcast(p, 0, "parameter " + name);
        for (auto& [name, b] : module_->named_buffers()) comm_->broadcast(b, 0, "buffer " + name);
    }
    state_ = std::make_shared<State>();
    state_->comm = comm_;
    state_->bucket_bytes = options_.bucket_bytes;
    for (auto& np : module_->named_parameters())
        if (np.second.requires_grad()) state_->params.push_back(np);
    std::vector<size_t> reverse(state_->params.size());
    for (size_t k = 0; k < reverse.size(); ++k) reverse[k] = reverse.size() - 1 - k;
    state_->layout(reverse);
    const std::weak_ptr<State> weak = state_;
    for (size_t i = 0; i < state_->params.size(); ++i)
        state_->params[i].second.register_post_accumulate_grad_hook([weak, i](const Tensor&) {
            if (auto s = weak.lock()) s->on_grad(i, weak);
        });
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::sync_buffers() {
    if (!options_.broadcast_buffers || comm_->size() == 1) return;
    NoGradGuard no_grad;
    std::vector<std::unique_ptr<Work>> works;
    for (auto& [name, b] : module_->named_buffers())
        works.push_back(comm_->broadcast_async(b, 0, "buffer " + name));
    for (auto& w : works) w->wait();
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
    if (module_->is_training()) sync_buffers();
    return module_->forward(x);
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp)
    : ddp_(ddp), was_(ddp.state_->sync) {
    ddp_.state_->sync = false;
}
DistributedDataParallel::NoSync::~NoSync() { ddp_.state_->sync = was_; }

std::vector<BucketInfo> DistributedDataParallel::buckets() const {
    std::vector<BucketInfo> out;
    for (const State::Bucket& b : state_->buckets) {
        BucketInfo info{state_->arena->groups()[b.group].dtype, b.end - b.begin, {}};
        for (size_t i : b.params) info.params.push_back(state_->params[i].first);
        out.push_back(std::move(info));
    }
    return out;
}

int64_t DistributedDataParallel::syncs() const { return state_->syncs; }

}  // namespace ember::dist
