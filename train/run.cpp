// Building a run from its configuration and task; one step outside the loop.
#include "train/run.h"

#include <algorithm>

#include "autograd/autocast.h"
#include "ember/ember.h"
#include "train/recipe.h"

namespace ember::train {

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
    else if (c.schedule == "cosine")  // the last step trains at the floor
        s = std::make_unique<optim::Cosine>(
            opt, optim::CosineOptions{.t_max = main_steps - 1, .eta_min = lr / 100});
    else if (c.schedule == "cosine-restarts")  // SGDR: down to the floor every epoch
        s = std::make_unique<optim::CosineWarmRestarts>(
            opt, optim::CosineWarmRestartsOptions{
                     .t_0 = std::max<int64_t>(1, total_steps / std::max<int64_t>(1, c.epochs)),
                     .eta_min = lr / 100});
    else if (c.schedule == "step")
        s = std::make_unique<optim::StepLR>(
            opt, optim::StepLROptions{.step_size = std::max<int64_t>(1, main_steps / 3)});
    else
        s = std::make_unique<optim::Constant>(opt);
    if (c.warmup > 0)
        s = std::make_unique<optim::Warmup>(std::move(s), optim::WarmupOptions{.steps = c.warmup});
    return s;
}

Run build_run(const TrainConfig& c, const std::function<Task()>& make_task) {
    validate(c);
    Run r;
    r.config = c;
    r.device = resolve_device(c);
    // deterministic: cuDNN's convolutions use deterministic algorithms only,
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
    manual_seed(c.seed);
    r.task = make_task();
    EMBER_CHECK(r.task.model && r.task.train_data && r.task.eval_data, "train: the task '",
                r.task.name, "' lacks ",
                !r.task.model ? "a model" : !r.task.train_data ? "training data" : "evaluation data");
    r.task.model->to(r.device);
    r.loader = std::make_unique<data::Loader>(
        r.task.train_data,
        data::LoaderOptions{.batch_size = c.batch_size, .seed = c.seed, .workers = c.workers,
                            .device = r.device,
                            .samples_per_epoch = r.task.samples_per_epoch,
                            .rank = r.comm ? r.comm->rank() : 0,
                            .world_size = r.world_size()},
        r.task.train_transforms);
    r.batches_per_epoch = r.loader->size();
    EMBER_CHECK(r.batches_per_epoch > 0, "train: the training set of ",
                r.task.train_data->size(), " samples gives no batch");
    r.steps_per_epoch = (r.batches_per_epoch + c.accumulate - 1) / c.accumulate;
    r.total_steps = r.steps_per_epoch * c.epochs;
    EMBER_CHECK(c.warmup < r.total_steps, "--warmup ", c.warmup, " is not shorter than the run (",
                r.total_steps, " steps): the LR would never leave the warm-up");
    // Rank 0's weights on every rank, and the gradients in all-reduced buckets.
    if (r.comm) r.ddp = std::make_unique<dist::DistributedDataParallel>(r.task.model, r.comm);
    std::vector<optim::GroupSpec> groups =
        optim::decay_groups(*r.task.model, effective_weight_decay(c));
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

Run build_run(const TrainConfig& c) {
    const Recipe& recipe = recipe_of(c);
    return build_run(c, [&] { return recipe.make_task(c); });
}

Tensor train_step(Run& run, const data::Batch& batch) {
    const std::string& amp = run.config.amp;
    Tensor loss;
    {
        amp::autocast ac(amp == "f16" ? DType::f16 : DType::bf16, amp != "off");
        const Tensor out =
            task_forward(run.task, in_format(batch.input, run.task.memory_format), false);
        loss = task_loss(run.task, out, batch.target);
    }
    if (run.scaler) {
        run.scaler->scale(loss).backward();
        run.scaler->step(*run.optimizer);
        run.scaler->update();
    } else {
        loss.backward();
        run.optimizer->step();
    }
    run.optimizer->zero_grad();
    return loss;
}

}  // namespace ember::train
