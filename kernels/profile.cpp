// The op profiler (kernels/profile.h).
#include "kernels/profile.h"

#include <algorithm>
#include <chrono>

#include "kernels/dispatch.h"
#include "kernels/front.h"

namespace ember::kernels {

namespace {

// The calling thread's installed profiler: set and restored by OpProfiler's
// constructor and destructor only, like NoGradGuard's flag.
thread_local OpProfiler* t_active = nullptr;

std::string signature(const OpCall& call) {
    std::string s;
    for (const Tensor* t : call.tensors) {
        if (!t || !t->defined()) continue;
        s += (s.empty() ? "" : ", ") + std::string(dtype_name(t->dtype())) + " " +
             shape_str(t->shape());
    }
    return s;
}

}  // namespace

OpProfiler::OpProfiler() : previous_(t_active) { t_active = this; }

OpProfiler::~OpProfiler() { t_active = previous_; }

OpProfiler* OpProfiler::active() { return t_active; }

void OpProfiler::time(const OpCall& call, const std::function<void()>& op) {
    if (busy_) return op();
    busy_ = true;
    const auto t0 = std::chrono::steady_clock::now();
    try {
        op();
    } catch (...) {
        busy_ = false;
        throw;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    busy_ = false;
    std::string sig = signature(call);
    OpTime& row = rows_[std::string(call.name) + "|" + sig];
    if (row.calls == 0) {
        row.name = call.name;
        row.signature = std::move(sig);
    }
    row.calls += 1;
    row.seconds += s;
    row.flops += call.flops;
}

std::vector<OpTime> OpProfiler::rows() const {
    std::vector<OpTime> out;
    out.reserve(rows_.size());
    for (const auto& [key, row] : rows_) out.push_back(row);
    std::stable_sort(out.begin(), out.end(),
                     [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
    return out;
}

double OpProfiler::total_seconds() const {
    double s = 0;
    for (const auto& [key, row] : rows_) s += row.seconds;
    return s;
}

}  // namespace ember::kernels
