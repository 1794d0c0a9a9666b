// CPU load of the other processes: /proc/stat's per-CPU busy and total
// ticks, read twice, over the CPUs of this process's affinity mask, less
// this process's own CPU time over the window (getrusage).
#include "core/cpu_load.h"

#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace ember {

namespace {

struct Ticks {
    long long busy = 0, total = 0;
};

// Per CPU index: busy and total ticks (an empty vector where unreadable).
std::vector<Ticks> read_ticks() {
    std::vector<Ticks> out;
    std::ifstream in("/proc/stat");
    std::string line;
    while (std::getline(in, line)) {
        // "cpuN user nice system idle iowait irq softirq steal ..."
        if (line.rfind("cpu", 0) != 0 || line.size() < 4 || line[3] < '0' || line[3] > '9') continue;
        std::istringstream s(line.substr(3));
        size_t cpu = 0;
        long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
        s >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
        if (!s || cpu > 65535) continue;
        if (out.size() <= cpu) out.resize(cpu + 1);
        out[cpu].busy = user + nice + system + irq + softirq + steal;
        out[cpu].total = out[cpu].busy + idle + iowait;
    }
    return out;
}

// This process's CPU time so far (all its threads), in seconds.
double own_cpu_seconds() {
    rusage u{};
    if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
    auto sec = [](const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); };
    return sec(u.ru_utime) + sec(u.ru_stime);
}

}  // namespace

CpuLoad measure_cpu_load(double seconds) {
    CpuLoad load;
    cpu_set_t mask;
    CPU_ZERO(&mask);
    const bool have_mask = sched_getaffinity(0, sizeof mask, &mask) == 0;
    load.cores = have_mask ? CPU_COUNT(&mask) : int(std::thread::hardware_concurrency());
    if (load.cores < 1) load.cores = 1;
    const std::vector<Ticks> a = read_ticks();
    if (a.empty() || !(seconds > 0)) return load;
    const double own_before = own_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    const std::vector<Ticks> b = read_ticks();
    // Threads of this process still spinning from an earlier parallel region
    // (OpenMP waits actively for a while) are not other processes.
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double own = elapsed > 0 ? (own_cpu_seconds() - own_before) / elapsed : 0;
    if (b.size() != a.size()) return load;
    double busy = 0;
    for (size_t cpu = 0; cpu < a.size(); ++cpu) {
        if (have_mask && (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &mask))) continue;
        const long long total = b[cpu].total - a[cpu].total;
        if (total > 0) busy += double(b[cpu].busy - a[cpu].busy) / double(total);
    }
    load.busy = std::clamp(busy - own, 0.0, double(load.cores));
    load.window_s = seconds;
    return load;
}

int threads_for_load(const CpuLoad& load) {
    const int taken = int(std::floor(load.busy + 0.5));
    return std::max(1, load.cores - taken);
}

std::string load_str(const CpuLoad& load) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.1f of %d cores busy with other processes", load.busy,
                  load.cores);
    return buf;
}

}  // namespace ember
