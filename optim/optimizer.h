// The optimizer base: parameter groups with their own hyper-parameters, the
// per-parameter state, step() through one fused multi-tensor update per group
// (kernels/optim.h), zero_grad, and the state saved to and loaded from a
// safetensors file. SGD, Adam, AdamW, LAMB and LARS derive from it. docs/optim.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "../core/tensor.h"
#include "../kernels/optim_hyper.h"

namespace ember::nn {
class Module;
struct TensorFile;
}  // namespace ember::nn
namespace ember::kernels {
struct UpdateTensors;
}  // namespace ember::kernels

namespace ember::optim {

/// The hyper-parameters of one parameter group: the optimizer's own struct
/// (kernels/optim_hyper.h), the one its options are and its update kernel
/// takes — AdamArgs (Adam, AdamW), SgdArgs, LambArgs or LarsArgs. LR
/// schedules change its `lr` (and `momentum` or `beta1`, see
/// Optimizer::set_momentum) between steps.
using Hyper =
    std::variant<kernels::AdamArgs, kernels::SgdArgs, kernels::LambArgs, kernels::LarsArgs>;

/// A group's learning rate, weight decay, and momentum (SGD's and LARS's
/// momentum, Adam's and LAMB's beta1: what a schedule cycles), whichever the
/// optimizer.
double& lr_of(Hyper& h);
double& weight_decay_of(Hyper& h);
double& momentum_of(Hyper& h);
double lr_of(const Hyper& h);
double weight_decay_of(const Hyper& h);
double momentum_of(const Hyper& h);
/// "momentum" or "beta1": what momentum_of names, for messages.
const char* momentum_name(const Hyper& h);

/// Parameters and the hyper-parameters they share. With `model` (same length
/// as `params`), `params` are f32 master weights of a low-precision model:
/// the update reads the gradients of `model` and writes the updated masters,
/// rounded, back into `model` in the same pass (master_weights() builds this).
struct ParamGroup {
    std::vector<Tensor> params;
    Hyper hyper;
    std::vector<Tensor> model;
};

/// A group given to an optimizer's constructor: its parameters and, where
/// they differ from the optimizer's options, its own lr and weight decay
/// (`model`: as ParamGroup's, from master_weights).
struct GroupSpec {
    std::vector<Tensor> params;
    std::optional<double> lr;
    std::optional<double> weight_decay;
    std::vector<Tensor> model;
};

/// Base of every optimizer. Not copyable; parameters are held by handle, so
/// the optimizer follows the module's tensors (Module::to keeps them).
class Optimizer {
public:
    virtual ~Optimizer() = default;
    Optimizer(const Optimizer&) = delete;
    Optimizer& operator=(const Optimizer&) = delete;

    /// "AdamW", "SGD", ...: names the state in files and messages.
    virtual const char* name() const = 0;

    /// One update of every parameter that has a gradient (others are skipped
    /// and keep their state), one fused pass per group. Returns true: the step
    /// was applied (amp::GradScaler::step returns false for a skipped step).
    /// Runs without recording (no graph), whatever the grad mode.
    bool step();
    /// The same update, skipped by the kernels themselves when found_inf[0]
    /// != 0 (a one-element f32 tensor on the parameters' device, 0 or 1: the
    /// loss scaler's flag): then parameters, state, copies and step counts
    /// keep every bit. Nothing is read on the host, so on CUDA the host never
    /// waits (Note [Device step counts] in kernels/optim.h).
    void step_unless(const Tensor& found_inf);
    /// Clears the gradients: to none by default (docs/tips.md #10), or to zeros.
    void zero_grad(bool set_to_none = true);

    std::vector<ParamGroup>& groups() { return groups_; }
    const std::vector<ParamGroup>& groups() const { return groups_; }
    /// The gradients step() would read (a model's, with master weights), of
    /// the parameters that have one: what clipping and loss scaling work on.
    std::vector<Tensor> gradients() const;
    /// Applied steps so far (restored by load). After step_unless on CUDA
    /// this reads the device's count of skipped steps: a host sync.
    int64_t steps() const;
    /// Calls of step() and step_unless() so far, applied or not (restored by
    /// load; known on the host): the Philox stream of stochastic rounding.
    int64_t step_calls() const { return calls_; }

    /// The group's learning rate (schedules read and write it). With a
    /// schedule table (set_schedule_tables) it is the table's entry at
    /// steps(), the LR the next step takes (a host sync on CUDA after
    /// step_unless), and set_lr is an Error.
    double lr(size_t group) const;
    void set_lr(size_t group, double lr);
    /// The group's momentum as a schedule cycles it: SGD's and LARS's
    /// momentum, Adam's, AdamW's and LAMB's beta1. Read from the momentum
    /// table where there is one, as lr().
    double momentum(size_t group) const;
    void set_momentum(size_t group, double momentum);

    /// Gives group `group` a schedule's values by step count (Note [Schedule
    /// tables] in kernels/optim.h): from the next step on, the update
    /// kernels take the LR of a tensor that has taken t applied steps from
    /// lr[min(t, size − 1)], and its momentum or beta1 from `momentum` when
    /// that is not empty (then of the same size), in place of the group's
    /// hyper-parameters, reading them from device memory: under loss scaling
    /// the schedule follows the applied steps with no host read. The tables
    /// are copied to the parameters' device at the next step. Values: finite,
    /// LRs >= 0, momenta in [0, 1). optim::Schedule::use_device_tables makes
    /// them.
    void set_schedule_tables(size_t group, std::vector<double> lr, std::vector<double> momentum);
    /// Back to the groups' hyper-parameters (which tables left as they were).
    void clear_schedule_tables();
    bool has_schedule_tables(size_t group) const;

    /// bf16 copies (master_weights) by stochastic rounding, seeded: each
    /// step draws from Philox stream `step` under `seed` (off by default).
    void set_stochastic_rounding(bool on, uint64_t seed = 0);

    /// The state as named tensors ("g<group>.p<index>.<buffer>": exp_avg,
    /// exp_avg_sq, max_exp_avg_sq, momentum_buffer; parameters that took a
    /// step) and a JSON
    /// string with the optimizer's name, steps, step calls, each parameter's
    /// step and the groups' hyper-parameters. Both read the step counts
    /// back from the device: on CUDA, a host sync.
    std::vector<std::pair<std::string, Tensor>> state_tensors() const;
    std::string state_json() const;
    /// Restores what state_tensors/state_json saved, after checking it all
    /// against this optimizer: its name, the groups and their sizes, every
    /// tensor's shape and dtype. On any mismatch an Error names it and
    /// nothing is changed.
    void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                    const std::string& json);
    /// The same through one safetensors file (the JSON under "ember.optimizer"
    /// in its metadata), written atomically.
    void save(const std::string& path) const;
    void load(const std::string& path);

protected:
    Optimizer(std::vector<GroupSpec> specs, const Hyper& defaults);

    /// Applies the rule to the tensors of one fused call of one group
    /// (kernels/optim.h): the group's parameters that have a gradient, each
    /// with its own step count and the place of its next one (one-element
    /// i64 views of the group's counts, on their device, written by the
    /// kernels), the found-inf flag of step_unless (else undefined), the
    /// group's schedule tables (else undefined), and this call's
    /// stochastic-rounding stream.
    virtual void update(const Hyper& h, const kernels::UpdateTensors& t) = 0;
    /// How many state buffers a parameter of a group with `h` keeps (0 to
    /// 3), and their names in saved state.
    virtual int buffers(const Hyper& h) const = 0;
    virtual const char* buffer_name(int k) const = 0;

    bool stochastic_ = false;
    uint64_t seed_ = 0;

private:
    struct State {
        Tensor buffers[3];  // undefined until the first update; as many as buffers()
    };
    // A group's schedule tables: the values, and their copies on the
    // parameters' device (made at the next step).
    struct Tables {
        std::vector<double> lr, momentum;
        Tensor lr_on, momentum_on;
    };
    void check_groups() const;
    void check_group(size_t group) const;
    void run_step(const Tensor& found_inf);
    // The table entry of `values` at steps() (Optimizer::lr with tables).
    double table_now(const std::vector<double>& values) const;
    // Each parameter's applied steps, read back to the host (a sync on CUDA).
    std::vector<int64_t> param_steps(size_t group) const;

    std::vector<ParamGroup> groups_;
    std::vector<std::vector<State>> state_;  // per group, per parameter
    // Per group: each parameter's applied steps, twice: an i64 tensor [2n]
    // on the group's device (undefined until the first step: all 0) where
    // parameter i's count is element 2i + phase_[group][i] and the update
    // writes the next count into the other one (Note [Device step counts]
    // in kernels/optim.h); the phase flips after every update call that
    // includes the parameter, applied or skipped, so it is known here.
    std::vector<Tensor> counts_;
    std::vector<std::vector<uint8_t>> phase_;
    // Per group: one-element views of every slot of counts_ (a view costs an
    // allocation: made once per counts tensor, not per step), and the counts
    // tensor they view.
    std::vector<std::vector<Tensor>> count_slots_;
    std::vector<Tensor> slots_of_;
    std::vector<Tables> tables_;  // per group; empty vectors: none
    int64_t calls_ = 0;      // step() and step_unless() calls
    int64_t skipped_ = 0;    // skipped steps known on the host (restored by load)
    Tensor skipped_flags_;   // + Σ of step_unless's flags: f32 [1] on their device
};

/// Two groups of a module's parameters that require grad: those with weight
/// decay (matrices and convolution kernels: 2 or more dims) and those without
/// (biases and normalization weights: 1 dim), as is usual for AdamW.
std::vector<GroupSpec> decay_groups(const nn::Module& m, double weight_decay);

/// f32 master weights for mixed-precision training: makes f32 copies of the
/// groups' parameters (all the module's trainable ones when `groups` is
/// empty), converts the module's floating parameters and buffers to `low`
/// (f16 or bf16) in place, and returns the groups with the copies as
/// `params` and the module's parameters as `model`: the optimizer then reads
/// the low-precision gradients and writes the updated weights back, rounded,
/// in the same pass. The module's parameters must be f32.
std::vector<GroupSpec> master_weights(nn::Module& m, DType low, std::vector<GroupSpec> groups = {});

}  // namespace ember::optim
