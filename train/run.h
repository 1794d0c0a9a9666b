// A training run's parts, built from its configuration and its task: the
// model on its device, the loader, the optimizer with its groups, the LR
// schedule, the loss scaler and, with ddp, the communicator — what
// `ember train`, `ember lr-find` and a program of one's own train with.
#pragma once

#include <functional>
#include <memory>

#include "../data/loader.h"
#include "../dist/communicator.h"
#include "../dist/ddp.h"
#include "../kernels/profile_trace.h"
#include "../nn/module.h"
#include "../optim/grad_scaler.h"
#include "../optim/optimizer.h"
#include "../optim/schedule.h"
#include "config.h"
#include "task.h"

namespace ember::train {

/// Everything a run trains with, built (and seeded) from its configuration.
struct Run {
    /// ddp: the job's communicator (first, so it is destroyed last).
    std::shared_ptr<dist::Communicator> comm;
    TrainConfig config;
    /// Why the OpenMP thread count is not the default, for the start table
    /// ("": it is; `ember train` fills it in when other processes keep cores busy).
    std::string threads_note;
    Device device;
    Task task;
    std::unique_ptr<data::Loader> loader;
    std::unique_ptr<optim::Optimizer> optimizer;
    std::unique_ptr<optim::Schedule> schedule;
    std::unique_ptr<amp::GradScaler> scaler;  ///< f16 only
    int64_t batches_per_epoch = 0;            ///< micro-batches
    int64_t steps_per_epoch = 0;              ///< optimizer steps: ceil(batches / accumulate)
    int64_t total_steps = 0;
    std::unique_ptr<dist::DistributedDataParallel> ddp;  ///< ddp
    /// --profile: the machine's limits the summary judges rates against
    /// (`ember train` measures them as `ember bench` does, before the run);
    /// zeros: the summary shows rates without fractions.
    kernels::MachineLimits profile_limits;

    /// The rank that prints and writes the run's files: rank 0, or the only one.
    bool lead() const { return !comm || comm->rank() == 0; }
    int world_size() const { return comm ? comm->size() : 1; }
    nn::Module& model() const { return *task.model; }
};

/// The run of a task of one's own: checks `c`, seeds the default generator
/// with c.seed, calls make_task (so the model's initialization is seeded),
/// moves the model to its device, and builds the loader, the optimizer
/// (decay_groups: no weight decay on biases and norms), the schedule over
/// every step of every epoch, and the scaler.
Run build_run(const TrainConfig& c, const std::function<Task()>& make_task);
/// The run of the reference model c.model names (its recipe's task).
Run build_run(const TrainConfig& c);

/// The optimizer c.optimizer names over `groups`, with the LR, weight decay
/// and momentum of `c`.
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c,
                                                 std::vector<optim::GroupSpec> groups);
/// The schedule c.schedule names over `total_steps`, behind c.warmup steps
/// (cosine-restarts: one cosine per epoch, total_steps / c.epochs steps).
std::unique_ptr<optim::Schedule> make_schedule(const TrainConfig& c, optim::Optimizer& opt,
                                               int64_t total_steps);

/// One training step of `run` on `batch` outside the loop (lr-find): forward
/// under autocast, backward (scaled under f16), the optimizer, zero_grad.
/// Returns the loss.
Tensor train_step(Run& run, const data::Batch& batch);

}  // namespace ember::train
