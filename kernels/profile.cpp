// The profiler (kernels/profile.h).
#include "kernels/profile.h"

#include <algorithm>
#include <cstdio>

#include "core/cuda_stream.h"
#include "core/storage.h"
#include "kernels/dispatch.h"
#include "kernels/front.h"

namespace ember::kernels {

namespace {

// The calling thread's installed profiler: set and restored by Profiler's
// constructor and destructor only, like NoGradGuard's flag.
thread_local Profiler* t_active = nullptr;

std::string signature(const OpCall& call) {
    std::string s;
    for (const Tensor* t : call.tensors) {
        if (!t || !t->defined()) continue;
        s += (s.empty() ? "" : ", ") + std::string(dtype_name(t->dtype())) + " " +
             shape_str(t->shape());
    }
    return s;
}

constexpr double kMB = 1024.0 * 1024.0;

}  // namespace

// A CUDA op between its two events; `event` indexes its GPU span in events_,
// whose start and duration are filled in by resolve().
struct Profiler::Pending {
    size_t event;
    int device;
    std::unique_ptr<CudaEvent> start, end;
};

// Note [GPU times on the host's clock]
// CUDA events give times only relative to each other. The first CUDA op of a
// device records a reference event and notes the host time just before; a
// GPU span then starts at that host time plus the milliseconds from the
// reference to its own start event. The reference is queued, so the GPU
// reaches it no earlier than the host time noted: GPU spans can only lie
// late, never before their launch.
struct Profiler::GpuClock {
    std::unique_ptr<CudaEvent> reference;
    double host_us = 0;
};

Profiler::Profiler() : start_(std::chrono::steady_clock::now()), previous_(t_active) {
    t_active = this;
}

Profiler::~Profiler() { t_active = previous_; }

Profiler* Profiler::active() { return t_active; }

double Profiler::now_us() const {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_)
        .count();
}

void Profiler::add(TraceEvent e) { events_.push_back(std::move(e)); }

void Profiler::counter(std::string name, std::vector<std::pair<std::string, double>> values) {
    counters_.push_back({std::move(name), now_us(), std::move(values)});
}

void Profiler::clear() {
    resolve();  // pending events must not outlive their slots
    events_.clear();
    counters_.clear();
    last_allocated_.clear();
}

TraceEvent Profiler::op_event(const OpCall& call, double start_us, double dur_us) const {
    TraceEvent e;
    e.name = call.name;
    e.category = "op";
    e.signature = signature(call);
    e.device = call.device.str();
    e.start_us = start_us;
    e.dur_us = dur_us;
    e.flops = call.flops;
    e.bytes = op_bytes(call);
    return e;
}

// The memory ember holds on `device`, when it changed since the last sample:
// a counter that Perfetto draws as a track under the process.
// The first sample of a device starts a new peak (reset_peak_memory_stats),
// so that the peak is the profiled span's.
void Profiler::sample_memory(Device device) {
    const int key = device.is_cuda() ? 1 + device.index : 0;
    if (!last_allocated_.count(key)) reset_peak_memory_stats(device);
    const MemoryStats m = memory_stats(device);
    auto [it, fresh] = last_allocated_.try_emplace(key, m.allocated_bytes);
    if (!fresh && it->second == m.allocated_bytes) return;
    it->second = m.allocated_bytes;
    std::vector<std::pair<std::string, double>> values{
        {"allocated MB", double(m.allocated_bytes) / kMB},
        {"peak MB", double(m.peak_allocated_bytes) / kMB}};
    if (device.is_cuda())
        values.emplace_back("reserved MB", double(CudaContext::of(device).memory_stats().reserved) / kMB);
    counter("memory " + device.str(), std::move(values));
}

void Profiler::time(const OpCall& call, const std::function<void()>& op) {
    if (busy_) return op();
    busy_ = true;
    const double t0 = now_us();
    try {
        op();
    } catch (...) {
        busy_ = false;
        throw;
    }
    const double t1 = now_us();
    busy_ = false;
    events_.push_back(op_event(call, t0, t1 - t0));
    sample_memory(call.device);
}

int Profiler::stream_track(StreamRef stream) {
    auto [it, fresh] = stream_tracks_.try_emplace(stream.handle, int(tracks_.size()));
    if (fresh) {
        char name[64];
        std::snprintf(name, sizeof name, "%s stream %p", stream.device.str().c_str(),
                      static_cast<void*>(stream.handle));
        tracks_.emplace_back(name);
    }
    return it->second;
}

void Profiler::time_cuda(const OpCall& call, StreamRef stream, const std::function<void()>& launch) {
    if (busy_) return launch();
    std::unique_ptr<GpuClock>& clock = gpu_clocks_[stream.device.index];
    if (!clock) {
        clock = std::make_unique<GpuClock>();
        clock->reference = std::make_unique<CudaEvent>(stream.device, true);
        clock->host_us = now_us();
        clock->reference->record(stream);
    }
    auto p = std::make_unique<Pending>();
    p->device = stream.device.index;
    p->start = std::make_unique<CudaEvent>(stream.device, true);
    p->end = std::make_unique<CudaEvent>(stream.device, true);
    busy_ = true;
    const double t0 = now_us();
    try {
        p->start->record(stream);
        launch();
        p->end->record(stream);
    } catch (...) {
        busy_ = false;
        throw;
    }
    const double t1 = now_us();
    busy_ = false;
    TraceEvent host = op_event(call, t0, t1 - t0);
    host.category = "launch";
    TraceEvent gpu = host;
    gpu.category = "op";
    gpu.track = stream_track(stream);
    events_.push_back(std::move(host));
    p->event = events_.size();
    events_.push_back(std::move(gpu));
    pending_.push_back(std::move(p));
    sample_memory(call.device);
}

void Profiler::resolve() {
    for (const std::unique_ptr<Pending>& p : pending_) {
        p->end->synchronize();
        const GpuClock& clock = *gpu_clocks_.at(p->device);
        TraceEvent& e = events_[p->event];
        e.start_us = clock.host_us + 1e3 * CudaEvent::elapsed_ms(*clock.reference, *p->start);
        e.dur_us = 1e3 * CudaEvent::elapsed_ms(*p->start, *p->end);
    }
    pending_.clear();
}

const std::vector<TraceEvent>& Profiler::events() {
    resolve();
    return events_;
}

std::vector<OpTime> Profiler::rows() {
    std::map<std::string, OpTime> by_key;  // name + signature
    for (const TraceEvent& e : events()) {
        if (e.category != "op") continue;
        OpTime& row = by_key[e.name + "|" + e.signature];
        if (row.calls == 0) {
            row.name = e.name;
            row.signature = e.signature;
        }
        row.calls += 1;
        row.seconds += e.dur_us * 1e-6;
        row.flops += e.flops;
    }
    std::vector<OpTime> out;
    out.reserve(by_key.size());
    for (auto& [key, row] : by_key) out.push_back(std::move(row));
    std::stable_sort(out.begin(), out.end(),
                     [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
    return out;
}

double Profiler::total_seconds() {
    double s = 0;
    for (const OpTime& r : rows()) s += r.seconds;
    return s;
}

ProfileRange::ProfileRange(const char* category, std::string_view name, std::string_view prefix)
    : prof_(t_active) {
    if (!prof_) [[likely]]
        return;
    category_ = category;
    name_.reserve(prefix.size() + name.size());
    name_.append(prefix).append(name);
    start_us_ = prof_->now_us();
}

ProfileRange::~ProfileRange() {
    if (!prof_) [[likely]]
        return;
    // A range that outlives its profiler's installation (it was replaced or
    // destroyed meanwhile) records nothing.
    if (t_active != prof_) return;
    TraceEvent e;
    e.name = std::move(name_);
    e.category = category_;
    e.start_us = start_us_;
    e.dur_us = prof_->now_us() - start_us_;
    prof_->add(std::move(e));
}

}  // namespace ember::kernels
