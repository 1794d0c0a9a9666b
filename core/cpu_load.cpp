// CPU load of the other processes: /proc/stat's per-CPU busy and total
// ticks, read twice, over the CPUs of this process's affinity mask.
#include "core/cpu_load.h"

#include <sched.h>

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
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    const std::vector<Ticks> b = read_ticks();
    if (b.size() != a.size()) return load;
    double busy = 0;
    for (size_t cpu = 0; cpu < a.size(); ++cpu) {
        if (have_mask && (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &mask))) continue;
        const long long total = b[cpu].total - a[cpu].total;
        if (total > 0) busy += double(b[cpu].busy - a[cpu].busy) / double(total);
    }
    load.busy = std::min<double>(busy, load.cores);
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
