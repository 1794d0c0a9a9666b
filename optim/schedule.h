// Learning-rate schedules (docs/tips.md #15): each one a closed form of the applied
// step count that writes the LR (and, for the cyclic ones, the momentum or
// beta1) into every group of an optimizer. PyTorch's formulas and defaults;
// the state is a small JSON. docs/optim.md, "LR schedules".
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "optimizer.h"

namespace ember::optim {

/// One value for every group (`0.1`) or one per group (`{0.1, 0.01}`), as
/// PyTorch's "float or list" arguments.
struct PerGroup {
    std::vector<double> values;
    PerGroup(double v) : values{v} {}
    PerGroup(std::initializer_list<double> v) : values(v) {}
};

/// Base of every schedule. It holds the optimizer (which must outlive it),
/// the groups' learning rates and momenta read at construction (the base
/// LRs the formulas scale), and the count of applied steps (PyTorch's
/// `last_epoch`). Constructing a schedule writes the step-0 LR into the
/// optimizer; each applied step() writes the next one, overwriting whatever
/// set_lr put there in between (every schedule is a closed form of the step
/// count, never a recursion on the current LR; see Note [Closed forms] in
/// schedule.cpp).
///
///     optim::SGD opt(model->parameters(), {.lr = 0.1, .momentum = 0.9});
///     optim::OneCycle sched(opt, {.max_lr = 0.1, .total_steps = 1000});
///     for (...) { ...; loss.backward(); sched.step(scaler.step(opt)); ... }
class Schedule {
public:
    virtual ~Schedule() = default;
    Schedule(const Schedule&) = delete;
    Schedule& operator=(const Schedule&) = delete;

    /// "OneCycle", "Cyclic", ...: names the state and the messages.
    virtual const char* name() const = 0;

    /// Advances one step when `applied` (what Optimizer::step and
    /// amp::GradScaler::step return; a skipped step changes nothing) and
    /// writes the new LR, and momentum where the schedule cycles it, into
    /// every group. An Error (nothing changed) past the schedule's end.
    /// After use_device_tables it does nothing: the device's step counts
    /// advance the schedule.
    void step(bool applied = true);
    /// Applied steps so far: PyTorch's `last_epoch`. After use_device_tables,
    /// the optimizer's applied steps since this schedule's step 0 (a host
    /// sync on CUDA after Optimizer::step_unless).
    int64_t steps() const;
    /// The LR of `group` now (at steps(); after use_device_tables, at the
    /// last step the tables hold once past them, as the kernels read them).
    double lr(size_t group = 0) const;
    /// The LR the last applied step used: lr_at(steps() − 1), the step-0 LR
    /// before any step (after use_device_tables, clamped to the tables as
    /// lr()). What a log of the run shows: lr() is the next step's.
    double last_lr(size_t group = 0) const;

    /// Drives the optimizer from device memory (Note [Schedule tables] in
    /// kernels/optim.h): writes this schedule's LRs, and momenta where it
    /// cycles them, for steps [0, length) into every group's tables
    /// (Optimizer::set_schedule_tables), indexed by the parameters' own
    /// step counts, so that each update takes the values of the steps the
    /// device actually applied. Past step length − 1 the last values hold.
    /// From then on step() does nothing and steps() reads the optimizer's
    /// applied steps: a loop under loss scaling never reads the found-inf
    /// flag on the host. The optimizer's applied steps now are this
    /// schedule's steps() now (read once: a host sync on CUDA after
    /// step_unless). An Error where lr_at or momentum_at reject a step
    /// below `length` (OneCycle: length <= total_steps + 1).
    void use_device_tables(int64_t length);
    /// Whether use_device_tables is in force.
    bool on_device() const { return table_length_ > 0; }

    /// The LR of `group` after `t` applied steps (t = 0: at construction).
    /// An Error where t lies past the schedule's end (OneCycle).
    virtual double lr_at(int64_t t, size_t group) const = 0;
    /// The momentum (SGD, LARS) or beta1 (Adam, AdamW, LAMB) of `group`
    /// after `t` steps, or none where the schedule leaves momentum alone.
    virtual std::optional<double> momentum_at(int64_t t, size_t group) const;

    Optimizer& optimizer() const { return opt_; }

    /// {"schedule": name, "steps": n, "base_lrs": [...], "base_momenta": [...]}
    /// (and "inner" for Warmup). The options are the constructor's, not saved.
    std::string state_json() const;
    /// Restores what state_json saved into a schedule constructed with the
    /// same options, and writes that step's LR into the optimizer. Checks
    /// the name, the number of groups, steps >= 0 (and within the schedule),
    /// finite LRs >= 0 and momenta in [0, 1); on any error an Error names
    /// it and nothing is changed. After use_device_tables it rewrites the
    /// tables for the loaded state, the optimizer's applied steps (load the
    /// optimizer's state first) being the loaded steps.
    void load_state(const std::string& json);

protected:
    /// Reads the groups' LRs and momenta.
    explicit Schedule(Optimizer& opt);
    /// Writes lr_at(steps()) and momentum_at(steps()) into every group: each
    /// derived constructor ends with it.
    void apply() { write(steps_); }
    size_t groups() const { return base_lrs_.size(); }
    /// One value per group from `v`; an Error naming `what` when its size
    /// is neither 1 nor the number of groups.
    std::vector<double> per_group(const PerGroup& v, const char* what) const;
    /// Checks lr_at's and momentum_at's arguments: a group that exists, t >= 0.
    void check_args(int64_t t, size_t group) const;
    /// The schedule this one delegates to, saved and loaded with it (Warmup).
    virtual Schedule* inner() const { return nullptr; }

    Optimizer& opt_;
    std::vector<double> base_lrs_;      ///< the groups' lr at construction
    std::vector<double> base_momenta_;  ///< their momentum or beta1 at construction

private:
    void write(int64_t t);
    // The tables of steps [0, table_length_) at the optimizer's counts: entry
    // c holds step c − origin_ (0 below origin_).
    void write_tables();
    int64_t steps_ = 0;
    int64_t table_length_ = 0;  // > 0: use_device_tables
    int64_t origin_ = 0;        // the optimizer's applied steps at this schedule's step 0
};

// --- The schedules ----------------------------------------------------------

enum class Anneal { cos, linear };

struct OneCycleOptions {
    PerGroup max_lr = 0.0;         ///< required: the peak LR
    int64_t total_steps = 0;       ///< required: steps in the cycle
    double pct_start = 0.3;        ///< fraction of the steps spent rising
    Anneal anneal = Anneal::cos;
    bool cycle_momentum = true;    ///< momentum (beta1) moves opposite to the LR
    PerGroup base_momentum = 0.85; ///< at the LR's peak
    PerGroup max_momentum = 0.95;  ///< at the start and the end
    double div_factor = 25;        ///< initial LR = max_lr / div_factor
    double final_div_factor = 1e4; ///< min LR = initial LR / final_div_factor
    bool three_phase = false;      ///< Smith's three phases instead of fastai's two
};

/// PyTorch's OneCycleLR (Smith, super-convergence). Two phases: initial →
/// max over pct_start·total_steps − 1 steps, then max → min at
/// total_steps − 1; three_phase: initial → max, max → initial (symmetric),
/// initial → min. Each phase anneals by cos (end + (start − end)/2 ·
/// (1 + cos(π·pct))) or linearly, and the momentum the other way. After the
/// last step (t = total_steps) the LR stays at min (PyTorch extrapolates the
/// last phase there); stepping further is an Error. The optimizer's own LRs
/// are not read: max_lr sets them.
class OneCycle : public Schedule {
public:
    OneCycle(Optimizer& opt, const OneCycleOptions& o);
    const char* name() const override { return "OneCycle"; }
    double lr_at(int64_t t, size_t group) const override;
    std::optional<double> momentum_at(int64_t t, size_t group) const override;

private:
    // lr_at and momentum_at in one: the phase and its fraction.
    struct Position {
        size_t phase;
        double pct;
    };
    Position position(int64_t t) const;
    double anneal(double from, double to, double pct) const;

    struct Phase {
        double end_step;
        int lr_from, lr_to;  // 0 initial, 1 max, 2 min
        int m_from, m_to;    // 0 base, 1 max
    };
    OneCycleOptions o_;
    std::vector<Phase> phases_;
    std::vector<std::vector<double>> lrs_;  // per group: initial, max, min
    std::vector<std::vector<double>> ms_;   // per group: base, max momentum
};

enum class CyclicMode { triangular, triangular2, exp_range };

struct CyclicOptions {
    PerGroup base_lr = 0.0;                 ///< the lower bound (the LR at the start)
    PerGroup max_lr = 0.0;                  ///< required: the upper bound
    int64_t step_size_up = 2000;
    std::optional<int64_t> step_size_down;  ///< default: step_size_up
    CyclicMode mode = CyclicMode::triangular;
    double gamma = 1.0;                     ///< exp_range: amplitude · gamma^t
    bool cycle_momentum = true;
    PerGroup base_momentum = 0.8;           ///< at the LR's peak
    PerGroup max_momentum = 0.9;            ///< at base_lr
};

/// PyTorch's CyclicLR (Smith, cyclical learning rates): with
/// c = floor(1 + t/(up + down)), x = 1 + t/(up + down) − c, scale = x/r while
/// x <= r = up/(up + down), else (x − 1)/(r − 1):
/// lr = base + (max − base)·scale·f, f = 1 (triangular), 1/2^(c−1)
/// (triangular2) or gamma^t (exp_range); momentum = max_m − (max_m − base_m)·scale·f.
class Cyclic : public Schedule {
public:
    Cyclic(Optimizer& opt, const CyclicOptions& o);
    const char* name() const override { return "Cyclic"; }
    double lr_at(int64_t t, size_t group) const override;
    std::optional<double> momentum_at(int64_t t, size_t group) const override;

private:
    // The position in the cycle (scale) and the amplitude's factor f at step t.
    struct Height {
        double scale, f;
    };
    Height height(int64_t t) const;

    CyclicOptions o_;
    double up_, down_;
    std::vector<double> base_, max_, base_m_, max_m_;
};

struct CosineOptions {
    int64_t t_max = 0;    ///< required: steps from the base LR down to eta_min
    double eta_min = 0;   ///< the floor
};

/// PyTorch's CosineAnnealingLR: lr = eta_min + (base − eta_min)·(1 +
/// cos(π·t/t_max))/2 for t <= t_max, and eta_min after (where PyTorch's closed
/// form would climb back up: a warm restart is CosineWarmRestarts' job).
class Cosine : public Schedule {
public:
    Cosine(Optimizer& opt, const CosineOptions& o);
    const char* name() const override { return "Cosine"; }
    double lr_at(int64_t t, size_t group) const override;

private:
    CosineOptions o_;
};

struct CosineWarmRestartsOptions {
    int64_t t_0 = 0;      ///< required: steps until the first restart
    int64_t t_mult = 1;   ///< each cycle is t_mult times longer than the last
    double eta_min = 0;   ///< the LR at the bottom of each cycle
};

/// PyTorch's CosineAnnealingWarmRestarts (SGDR, Loshchilov & Hutter):
/// lr = eta_min + (base − eta_min)·(1 + cos(π·T_cur/T_i))/2, T_cur the steps
/// since the last restart, T_i the current cycle's length (t_0, t_0·t_mult, ...).
class CosineWarmRestarts : public Schedule {
public:
    CosineWarmRestarts(Optimizer& opt, const CosineWarmRestartsOptions& o);
    const char* name() const override { return "CosineWarmRestarts"; }
    double lr_at(int64_t t, size_t group) const override;

private:
    CosineWarmRestartsOptions o_;
};

struct StepLROptions {
    int64_t step_size = 0;  ///< required: steps between decays
    double gamma = 0.1;
};

/// PyTorch's StepLR: lr = base·gamma^floor(t / step_size).
class StepLR : public Schedule {
public:
    StepLR(Optimizer& opt, const StepLROptions& o);
    const char* name() const override { return "StepLR"; }
    double lr_at(int64_t t, size_t group) const override;

private:
    StepLROptions o_;
};

struct ConstantOptions {
    double factor = 1.0;      ///< in [0, 1]
    int64_t total_steps = 0;  ///< steps at base·factor before base
};

/// The base LR, constant. With a factor and total_steps, PyTorch's
/// ConstantLR: base·factor for t < total_steps, then base (PyTorch's defaults
/// are 1/3 for 5 steps; ember's leave the LR as it is).
class Constant : public Schedule {
public:
    explicit Constant(Optimizer& opt, const ConstantOptions& o = {});
    const char* name() const override { return "Constant"; }
    double lr_at(int64_t t, size_t group) const override;

private:
    ConstantOptions o_;
};

struct WarmupOptions {
    int64_t steps = 0;              ///< required: the warm-up's length
    double start_factor = 1.0 / 3;  ///< in [0, 1]: the first LR is this times the target
};

/// Linear warm-up in front of any schedule: for t < steps the LR rises
/// linearly from start_factor·target to the target, the inner schedule's
/// step-0 LR, as PyTorch's LinearLR (closed form) does; from then on it is the
/// inner schedule shifted by `steps` (PyTorch's SequentialLR with one
/// milestone). The momentum during warm-up is the inner schedule's at step 0.
class Warmup : public Schedule {
public:
    Warmup(std::unique_ptr<Schedule> inner, const WarmupOptions& o);
    const char* name() const override { return "Warmup"; }
    double lr_at(int64_t t, size_t group) const override;
    std::optional<double> momentum_at(int64_t t, size_t group) const override;

protected:
    Schedule* inner() const override { return inner_.get(); }

private:
    std::unique_ptr<Schedule> inner_;
    WarmupOptions o_;
};

}  // namespace ember::optim
