// Building a run from its configuration, and evaluation on the test split.
#include "tools/train/run.h"

#include <algorithm>

#include "tools/train/subset.h"

namespace ember::train {

namespace {
// Fashion-MNIST's training-set mean and standard deviation.
const data::ChannelStats kFashionStats{{0.2860}, {0.3530}};
// --data synthetic: Fashion-MNIST's split sizes.
constexpr int64_t kSyntheticTrain = 60000, kSyntheticTest = 10000;

// --data synthetic: one task of 70,000 samples under `seed` (the classes'
// prototypes depend on it; the first 60,000 train, the rest test), computed
// once into memory (220 MB, in parallel), so that the loader reads a sample
// as it reads Fashion-MNIST's — a copy — rather than drawing 784 values.
std::shared_ptr<const data::Dataset> synthetic_data(uint64_t seed) {
    const int64_t n = kSyntheticTrain + kSyntheticTest;
    const data::SyntheticDataset task(n, {1, 28, 28}, 10, seed);
    Tensor inputs = empty({n, 1, 28, 28});
    Tensor labels = empty({n}, {DType::i64});
    float* in = inputs.data<float>();
    int64_t* label = labels.data<int64_t>();
    const int64_t numel = task.sample_numel();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) label[i] = task.read(i, in + i * numel);
    return std::make_shared<data::TensorDataset>(inputs, labels);
}
}  // namespace

Data load_data(const TrainConfig& c) {
    Data d;
    std::shared_ptr<const data::Dataset> train;
    if (c.data == "synthetic") {
        train = synthetic_data(c.seed);
        d.test = std::make_shared<Subset>(train, kSyntheticTest, kSyntheticTrain);
        train = std::make_shared<Subset>(train, kSyntheticTrain);
    } else {
        train = std::make_shared<data::FashionMNIST>(data::Split::train, c.data_dir);
        d.test = std::make_shared<data::FashionMNIST>(data::Split::test, c.data_dir);
    }
    d.train = c.limit > 0 && c.limit < train->size()
                  ? std::shared_ptr<const data::Dataset>(std::make_shared<Subset>(train, c.limit))
                  : std::shared_ptr<const data::Dataset>(train);
    return d;
}

data::Compose train_transforms(const TrainConfig& c) {
    if (c.model == "resnet8")
        return data::Compose{data::RandomCrop(28, 2), data::RandomHorizontalFlip(),
                             data::Normalize(kFashionStats)};
    return data::Compose{data::RandomHorizontalFlip(), data::Normalize(kFashionStats)};
}

data::Compose test_transforms() { return data::Compose{data::Normalize(kFashionStats)}; }

std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c,
                                                 std::vector<optim::GroupSpec> groups) {
    const double lr = effective_lr(c), wd = effective_weight_decay(c);
    for (optim::GroupSpec& g : groups)
        if (g.weight_decay && *g.weight_decay > 0) g.weight_decay = wd;
    if (c.optimizer == "adamw")
        return std::make_unique<optim::AdamW>(std::move(groups), optim::AdamWOptions{.lr = lr, .weight_decay = wd});
    if (c.optimizer == "adam")
        return std::make_unique<optim::Adam>(std::move(groups), optim::AdamOptions{.lr = lr, .weight_decay = wd});
    if (c.optimizer == "sgd")
        return std::make_unique<optim::SGD>(
            std::move(groups), optim::SGDOptions{.lr = lr, .momentum = c.momentum, .weight_decay = wd,
                                                 .nesterov = c.momentum > 0});
    if (c.optimizer == "lamb")
        return std::make_unique<optim::LAMB>(std::move(groups), optim::LAMBOptions{.lr = lr, .weight_decay = wd});
    auto lars = std::make_unique<optim::LARS>(
        std::move(groups), optim::LARSOptions{.lr = lr, .momentum = c.momentum, .weight_decay = wd});
    // decay_groups puts biases and norms last: LARS leaves them alone (You et al.).
    if (lars->groups().size() > 1) lars->exclude(lars->groups().size() - 1);
    return lars;
}

std::unique_ptr<optim::Schedule> make_schedule(const TrainConfig& c, optim::Optimizer& opt,
                                               int64_t total_steps) {
    const double lr = effective_lr(c);
    const int64_t main_steps = std::max<int64_t>(2, total_steps - c.warmup);
    std::unique_ptr<optim::Schedule> s;
    if (c.schedule == "onecycle")
        s = std::make_unique<optim::OneCycle>(
            opt, optim::OneCycleOptions{.max_lr = lr, .total_steps = main_steps,
                                        .cycle_momentum = c.optimizer != "lamb"});
    else if (c.schedule == "cyclic")
        s = std::make_unique<optim::Cyclic>(
            opt, optim::CyclicOptions{.base_lr = lr / 10, .max_lr = lr,
                                      .step_size_up = std::max<int64_t>(1, main_steps / 4),
                                      .cycle_momentum = false});
    else if (c.schedule == "cosine")
        s = std::make_unique<optim::CosineWarmRestarts>(
            opt, optim::CosineWarmRestartsOptions{.t_0 = main_steps, .eta_min = lr / 100});
    else if (c.schedule == "step")
        s = std::make_unique<optim::StepLR>(
            opt, optim::StepLROptions{.step_size = std::max<int64_t>(1, main_steps / 3)});
    else
        s = std::make_unique<optim::Constant>(opt);
    if (c.warmup > 0)
        s = std::make_unique<optim::Warmup>(std::move(s), optim::WarmupOptions{.steps = c.warmup});
    return s;
}

Run build_run(const TrainConfig& c) {
    Run r;
    r.config = c;
    r.device = resolve_device(c);
    // --deterministic: cuDNN's convolutions use deterministic algorithms only,
    // and its heuristic choice rather than timing (which may pick another
    // algorithm in another run). The CPU backend and ember's own CUDA kernels
    // are deterministic anyway. Process-wide switches, as the run is.
    if (c.deterministic) {
        set_cudnn_deterministic(true);
        set_cudnn_benchmark(false);
    }
    if (c.ddp) {
        // On a GPU: NCCL, each rank on cuda:<local rank> (docs/dist.md).
        r.comm = dist::init("auto", {.timeout = std::chrono::milliseconds(
                                         int64_t(c.dist_timeout * 1000)),
                                     .device = r.device});
        if (r.device.is_cuda()) r.device = r.comm->device();
    }
    r.data = load_data(c);
    manual_seed(c.seed);
    r.model = nn::make_model(c.model);
    r.model->to(r.device);
    r.loader = std::make_unique<data::Loader>(
        r.data.train,
        data::LoaderOptions{.batch_size = c.batch_size, .seed = c.seed, .workers = c.workers,
                            .device = r.device, .rank = r.comm ? r.comm->rank() : 0,
                            .world_size = r.world_size()},
        train_transforms(c));
    r.batches_per_epoch = r.loader->size();
    EMBER_CHECK(r.batches_per_epoch > 0, "train: the training set of ", r.data.train->size(),
                " samples gives no batch");
    r.steps_per_epoch = (r.batches_per_epoch + c.accumulate - 1) / c.accumulate;
    r.total_steps = r.steps_per_epoch * c.epochs;
    // Rank 0's weights on every rank, and the gradients in all-reduced buckets.
    if (r.comm) r.ddp = std::make_unique<dist::DistributedDataParallel>(r.model, r.comm);
    std::vector<optim::GroupSpec> groups =
        optim::decay_groups(*r.model, effective_weight_decay(c));
    r.optimizer = make_optimizer(c, std::move(groups));
    r.schedule = make_schedule(c, *r.optimizer, r.total_steps);
    if (c.amp == "f16") {
        r.scaler = std::make_unique<amp::GradScaler>();
        // Skipped steps must not advance the schedule; the kernels read it at
        // the steps they applied, so the loop never reads the found-inf flag
        // (Note [Schedule tables] in kernels/optim.h). t = total_steps is the
        // schedule's last step (the LR after the last update).
        r.schedule->use_device_tables(r.total_steps + 1);
    }
    return r;
}

Tensor in_format(const Tensor& images, MemoryFormat format) {
    return images.dim() == 4 ? images.contiguous(format) : images;
}

Evaluation evaluate(nn::Module& model, const data::Dataset& test, Device device,
                    const std::string& amp, int workers, MemoryFormat format) {
    const bool was_training = model.is_training();
    model.eval();
    NoGradGuard no_grad;
    auto dataset = std::shared_ptr<const data::Dataset>(&test, [](const data::Dataset*) {});
    data::Loader loader(dataset,
                        {.batch_size = 1000, .shuffle = false, .workers = workers, .device = device},
                        test_transforms());
    Tensor loss_sum = zeros({}, {DType::f64, device}), correct = zeros({}, {DType::f64, device});
    for (data::Batch& b : loader.epoch(0)) {
        amp::autocast ac(amp == "f16" ? DType::f16 : DType::bf16, amp != "off");
        const Tensor logits = model(in_format(b.input, format));
        loss_sum = add(loss_sum, cross_entropy(logits, b.target, {.reduction = Reduction::sum}).to(DType::f64));
        correct = add(correct, sum(eq(argmax(logits, 1), b.target).to(DType::f64)));
    }
    model.train(was_training);
    const double n = double(test.size());
    return {loss_sum.item() / n, correct.item() / n, test.size()};
}

}  // namespace ember::train
