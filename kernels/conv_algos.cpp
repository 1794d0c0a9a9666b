// The conv2d algorithm switches, the per-device caches of cuDNN choices, and
// their file (kernels/conv_algos.h, Note [Conv algorithm file]). Plain C++:
// no CUDA header; devices are found through core/cuda_context.h, which a
// build without CUDA answers with no devices.
#include "kernels/conv_algos.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include "core/atomic_file.h"
#include "core/cuda_context.h"
#include "core/device.h"
#include "core/error.h"

namespace ember {

namespace {

constexpr int kMaxDevices = 64;  // as core/cuda_context.cpp
constexpr const char* kMagic = "ember-conv-algorithms 1";

}  // namespace

namespace kernels {

const char* conv_direction_name(ConvDirection d) {
    switch (d) {
        case ConvDirection::forward:
            return "forward";
        case ConvDirection::backward_data:
            return "backward_data";
        case ConvDirection::backward_filter:
            return "backward_filter";
    }
    return "?";
}

ConvAlgoKey conv_algo_key(ConvDirection direction, DType dtype, const Conv2dShape& s,
                          bool deterministic, bool benchmark, bool channels_last) {
    return {direction, dtype,    s.n,           s.c,       s.h,          s.w,  s.o,
            s.kh,      s.kw,     s.sh,          s.sw,      s.ph,         s.pw, s.dh,
            s.dw,      s.groups, deterministic, benchmark, channels_last};
}

std::optional<ConvAlgoChoice> ConvAlgoCache::find(const ConvAlgoKey& key) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    return it->second;
}

void ConvAlgoCache::put(const ConvAlgoKey& key, const ConvAlgoChoice& choice) {
    std::lock_guard<std::mutex> lock(mutex_);
    map_[key] = choice;
}

void ConvAlgoCache::erase(const ConvAlgoKey& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    map_.erase(key);
}

void ConvAlgoCache::clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    map_.clear();
}

size_t ConvAlgoCache::size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return map_.size();
}

std::vector<std::pair<ConvAlgoKey, ConvAlgoChoice>> ConvAlgoCache::entries() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return {map_.begin(), map_.end()};
}

ConvAlgoCache& conv_algo_cache(int index) {
    EMBER_CHECK(index >= 0 && index < kMaxDevices, "conv algorithm cache: no device cuda:", index);
    // Never destroyed, as the contexts: ops may run during static destruction.
    static std::mutex mutex;
    static auto* caches = new std::array<std::unique_ptr<ConvAlgoCache>, kMaxDevices>();
    std::lock_guard<std::mutex> lock(mutex);
    auto& c = (*caches)[size_t(index)];
    if (!c) c = std::make_unique<ConvAlgoCache>();
    return *c;
}

// ---- The file ----

std::string format_conv_algorithms(const std::vector<ConvAlgoRecord>& records) {
    std::ostringstream os;
    os << kMagic << "\n";
    const std::string* device = nullptr;
    for (const ConvAlgoRecord& r : records) {
        if (!device || *device != r.device) os << "device " << r.device << "\n";
        device = &r.device;
        const ConvAlgoKey& k = r.key;
        os << conv_direction_name(k.direction) << " " << dtype_name(k.dtype) << " x=" << k.n << ","
           << k.c << "," << k.h << "," << k.w << " w=" << k.o << ","
           << (k.groups > 0 ? k.c / k.groups : 0) << "," << k.kh << "," << k.kw
           << " stride=" << k.sh << "," << k.sw << " padding=" << k.ph << "," << k.pw
           << " dilation=" << k.dh << "," << k.dw << " groups=" << k.groups
           << " deterministic=" << int(k.deterministic) << " benchmark=" << int(k.benchmark)
           << (k.channels_last ? " channels_last=1" : "") << " algo=" << r.choice.algo
           << " math=" << r.choice.math << "\n";
    }
    return os.str();
}

namespace {

// Where a line of the file is, for its errors.
struct Line {
    const std::string& origin;
    int number;
    const std::string& text;
};

[[noreturn]] void fail(const Line& l, const std::string& what) {
    EMBER_FAIL("conv algorithm file '", l.origin, "', line ", l.number, ": ", what, " in '", l.text,
               "'");
}

// Parses one entry line under `device`.
ConvAlgoRecord parse_entry(const Line& l, const std::string& device) {
    std::istringstream is(l.text);
    std::string dir, dt, tok;
    is >> dir >> dt;
    ConvAlgoRecord r;
    r.device = device;
    ConvAlgoKey& k = r.key;
    if (dir == "forward")
        k.direction = ConvDirection::forward;
    else if (dir == "backward_data")
        k.direction = ConvDirection::backward_data;
    else if (dir == "backward_filter")
        k.direction = ConvDirection::backward_filter;
    else
        fail(l, "unknown direction '" + dir + "' (forward, backward_data or backward_filter)");
    bool dtype_ok = false;
    for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16})
        if (dt == dtype_name(t)) k.dtype = t, dtype_ok = true;
    if (!dtype_ok) fail(l, "unknown dtype '" + dt + "' (f32, f64, f16 or bf16)");

    // Each field: its name, how many comma-separated integers, where they go.
    int64_t wshape[4] = {}, det = 0, bench = 0, algo = 0, math = 0, last = 0;
    struct Field {
        const char* name;
        int count;
        int64_t* dst[4];
        bool seen = false;
        bool optional = false;
    };
    Field fields[] = {{"x", 4, {&k.n, &k.c, &k.h, &k.w}},
                      {"w", 4, {&wshape[0], &wshape[1], &wshape[2], &wshape[3]}},
                      {"stride", 2, {&k.sh, &k.sw}},
                      {"padding", 2, {&k.ph, &k.pw}},
                      {"dilation", 2, {&k.dh, &k.dw}},
                      {"groups", 1, {&k.groups}},
                      {"deterministic", 1, {&det}},
                      {"benchmark", 1, {&bench}},
                      {"channels_last", 1, {&last}, false, true},  // absent: NCHW
                      {"algo", 1, {&algo}},
                      {"math", 1, {&math}}};
    constexpr int64_t kLimit = (int64_t(1) << 31) - 1;  // cuDNN takes int sizes
    while (is >> tok) {
        const size_t eq = tok.find('=');
        const std::string name = tok.substr(0, eq);
        Field* f = nullptr;
        for (Field& g : fields)
            if (name == g.name) f = &g;
        if (eq == std::string::npos || !f) fail(l, "unknown field '" + tok + "'");
        if (f->seen) fail(l, "field '" + name + "' given twice");
        f->seen = true;
        const std::string value = tok.substr(eq + 1);
        if (std::count(value.begin(), value.end(), ',') != f->count - 1)
            fail(l, "field '" + name + "' needs " + std::to_string(f->count) +
                        " comma-separated values, got '" + tok + "'");
        std::istringstream vs(value);
        for (int i = 0; i < f->count; ++i) {
            std::string part;
            std::getline(vs, part, ',');
            if (part.empty() || part.size() > 10 ||
                part.find_first_not_of("0123456789") != std::string::npos)
                fail(l, "field '" + name + "' needs non-negative integers, got '" + tok + "'");
            const int64_t v = std::stoll(part);
            if (v > kLimit) fail(l, "field '" + name + "' holds " + part + ", above 2^31 - 1");
            *f->dst[i] = v;
        }
    }
    for (const Field& f : fields)
        if (!f.seen && !f.optional) fail(l, std::string("missing field '") + f.name + "'");

    k.o = wshape[0], k.kh = wshape[2], k.kw = wshape[3];
    if (det > 1 || bench > 1 || last > 1)
        fail(l, "deterministic, benchmark and channels_last must be 0 or 1");
    k.deterministic = det == 1, k.benchmark = bench == 1, k.channels_last = last == 1;
    if (algo > 63 || math > 3)
        fail(l, "algo " + std::to_string(algo) + " or math " + std::to_string(math) +
                    " is not a cuDNN value");
    r.choice = {int(algo), int(math), kWorkspaceUnknown};
    if (k.n < 1 || k.c < 1 || k.h < 1 || k.w < 1 || k.o < 1 || k.kh < 1 || k.kw < 1)
        fail(l, "sizes must be at least 1");
    if (k.sh < 1 || k.sw < 1 || k.dh < 1 || k.dw < 1 || k.groups < 1)
        fail(l, "stride, dilation and groups must be at least 1");
    if (k.c % k.groups != 0 || k.o % k.groups != 0 || wshape[1] * k.groups != k.c)
        fail(l, "x, w and groups do not fit: C = " + std::to_string(k.c) + ", O = " +
                    std::to_string(k.o) + ", C/groups in w = " + std::to_string(wshape[1]) +
                    ", groups = " + std::to_string(k.groups));
    if (k.h + 2 * k.ph < k.dh * (k.kh - 1) + 1 || k.w + 2 * k.pw < k.dw * (k.kw - 1) + 1)
        fail(l, "the padded input is smaller than the dilated kernel");
    return r;
}

}  // namespace

std::vector<ConvAlgoRecord> parse_conv_algorithms(const std::string& text,
                                                  const std::string& origin) {
    std::vector<ConvAlgoRecord> out;
    std::set<std::pair<std::string, ConvAlgoKey>> seen;
    std::istringstream is(text);
    std::string line, device;
    int number = 0;
    bool magic = false;
    while (std::getline(is, line)) {
        ++number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        const size_t start = line.find_first_not_of(" \t");
        if (start == std::string::npos || line[start] == '#') continue;
        line = line.substr(start, line.find_last_not_of(" \t") - start + 1);
        const Line l{origin, number, line};
        if (!magic) {
            if (line != kMagic)
                fail(l, std::string("not a conv algorithm file (the first line must be '") +
                            kMagic + "')");
            magic = true;
        } else if (line == "device" || line.rfind("device ", 0) == 0 ||
                   line.rfind("device\t", 0) == 0) {
            const size_t b = line.find_first_not_of(" \t", 6);
            if (b == std::string::npos) fail(l, "empty device name");
            device = line.substr(b);
        } else {
            if (device.empty()) fail(l, "an entry before any 'device' line");
            ConvAlgoRecord r = parse_entry(l, device);
            if (!seen.insert({r.device, r.key}).second)
                fail(l, "a second entry for one convolution");
            out.push_back(std::move(r));
        }
    }
    if (!magic)
        EMBER_FAIL("conv algorithm file '", origin, "' is empty (expected '", kMagic,
                   "' on its first line)");
    return out;
}

}  // namespace kernels

size_t save_conv_algorithms(const std::string& path) {
    // Devices of one model share their choices: merged by (name, key).
    std::map<std::pair<std::string, kernels::ConvAlgoKey>, kernels::ConvAlgoChoice> merged;
    const int count = cuda_device_count();
    for (int i = 0; i < count && i < kMaxDevices; ++i) {
        const auto entries = kernels::conv_algo_cache(i).entries();
        if (entries.empty()) continue;
        const std::string name = cuda_device_properties(i).name;
        for (const auto& [key, choice] : entries) merged.emplace(std::pair{name, key}, choice);
    }
    std::vector<kernels::ConvAlgoRecord> records;
    for (const auto& [dk, choice] : merged) records.push_back({dk.first, dk.second, choice});
    const std::string text = kernels::format_conv_algorithms(records);
    AtomicFile f(path, "save_conv_algorithms: '" + path + "'");
    f.write(text.data(), text.size());
    f.commit();
    return records.size();
}

size_t load_conv_algorithms(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    EMBER_CHECK(in.good(), "load_conv_algorithms: cannot open '", path, "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    EMBER_CHECK(!in.bad(), "load_conv_algorithms: cannot read '", path, "'");
    const auto records = kernels::parse_conv_algorithms(ss.str(), path);  // all or nothing
    size_t loaded = 0;
    const int count = cuda_device_count();
    for (int i = 0; i < count && i < kMaxDevices; ++i) {
        const std::string name = cuda_device_properties(i).name;
        for (const kernels::ConvAlgoRecord& r : records)
            if (r.device == name) {
                kernels::conv_algo_cache(i).put(r.key, r.choice);
                ++loaded;
            }
    }
    return loaded;
}

void clear_conv_algorithms() {
    const int count = cuda_device_count();
    for (int i = 0; i < count && i < kMaxDevices; ++i) kernels::conv_algo_cache(i).clear();
}

}  // namespace ember
