// The Chrome trace event file of a profile (kernels/profile_trace.h), and
// reading it back. The format: https://docs.google.com/document/d/
// 1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU (the "JSON Object Format").
// Perfetto honours only the process_name, thread_name and *_sort_index
// metadata, so those are what is written.
#include "kernels/profile_trace.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/file.h"

namespace ember::kernels {

namespace {

using Json = nlohmann::ordered_json;

constexpr int kPid = 1;
constexpr uint64_t kMaxTraceBytes = uint64_t(1) << 30;

// Microseconds to the nanosecond: what the clocks resolve, in short numbers.
double ns(double us) { return std::round(us * 1e3) / 1e3; }

// Tracks are numbered from 0 in a Trace and from 1 as tids (0 reads as "no
// thread" in some viewers).
int tid_of(int track) { return track + 1; }

Json metadata(const char* name, int tid, Json args) {
    Json m{{"name", name}, {"ph", "M"}, {"pid", kPid}};
    if (tid > 0) m["tid"] = tid;
    m["args"] = std::move(args);
    return m;
}

}  // namespace

Trace take_trace(Profiler& prof, TraceInfo info) {
    Trace t;
    t.info = std::move(info);
    t.events = prof.events();  // waits for CUDA ops' times first
    t.counters = prof.counters();
    t.tracks = prof.tracks();
    // To the nanosecond, as the file holds them: a summary of the trace in
    // memory and one of the file read back are the same.
    for (TraceEvent& e : t.events) {
        e.start_us = ns(e.start_us);
        e.dur_us = ns(e.dur_us);
    }
    for (CounterEvent& c : t.counters) c.ts_us = ns(c.ts_us);
    return t;
}

std::string chrome_trace_json(const Trace& t) {
    Json events = Json::array();
    events.push_back(metadata("process_name", 0, {{"name", t.info.title.empty() ? "ember" : t.info.title}}));
    events.push_back(metadata("process_sort_index", 0, {{"sort_index", 0}}));
    for (size_t k = 0; k < t.tracks.size(); ++k) {
        events.push_back(metadata("thread_name", tid_of(int(k)), {{"name", t.tracks[k]}}));
        events.push_back(metadata("thread_sort_index", tid_of(int(k)), {{"sort_index", int(k)}}));
    }
    for (const TraceEvent& e : t.events) {
        Json x{{"name", e.name},         {"cat", e.category}, {"ph", "X"},
               {"ts", ns(e.start_us)},  {"dur", ns(e.dur_us)}, {"pid", kPid},
               {"tid", tid_of(e.track)}};
        if (!e.signature.empty() || !e.device.empty() || e.flops > 0 || e.bytes > 0) {
            Json args = Json::object();
            if (!e.signature.empty()) args["shapes"] = e.signature;
            if (!e.device.empty()) args["device"] = e.device;
            if (e.flops > 0) args["flops"] = e.flops;
            if (e.bytes > 0) args["bytes"] = e.bytes;
            x["args"] = std::move(args);
        }
        events.push_back(std::move(x));
    }
    for (const CounterEvent& c : t.counters) {
        Json args = Json::object();
        for (const auto& [k, v] : c.values) args[k] = v;
        events.push_back(
            {{"name", c.name}, {"ph", "C"}, {"ts", ns(c.ts_us)}, {"pid", kPid}, {"args", std::move(args)}});
    }
    Json limits{{"device", t.info.limits.device},
                {"gemm_gflops", t.info.limits.gemm_gflops},
                {"copy_gbps", t.info.limits.copy_gbps}};
    Json doc{{"traceEvents", std::move(events)},
             {"displayTimeUnit", "ms"},
             {"otherData", {{"ember", {{"version", 1}, {"title", t.info.title}, {"limits", limits}}}}}};
    // One event per line: compact, and still readable with a pager or diff.
    std::string text = "{\"traceEvents\": [\n";
    const Json& list = doc["traceEvents"];
    for (size_t i = 0; i < list.size(); ++i) text += list[i].dump() + (i + 1 < list.size() ? ",\n" : "\n");
    text += "],\n";
    text.append("\"displayTimeUnit\": ").append(doc["displayTimeUnit"].dump()).append(",\n");
    text.append("\"otherData\": ").append(doc["otherData"].dump()).append("\n}\n");
    return text;
}

void write_chrome_trace(const Trace& t, const std::string& path) {
    const std::string text = chrome_trace_json(t);
    AtomicFile f(path, "write_chrome_trace: '" + path + "'");
    f.write(text.data(), text.size());
    f.commit();
}

namespace {

// A field of a trace event, of the type wanted, or an Error naming the
// event's position and the field.
const Json& field(const Json& e, const char* key, Json::value_t type, size_t i,
                  const std::string& where) {
    const auto it = e.find(key);
    const bool number = type == Json::value_t::number_float;
    EMBER_CHECK(it != e.end() && (number ? it->is_number() : it->type() == type), where,
                ": traceEvents[", i, "] has no ", number ? "numeric" : "valid", " '", key,
                "' field");
    return *it;
}

// The track of an event: its tid, 1 to 4096 as ember writes them.
int track_of(const Json& e, size_t i, const std::string& where) {
    const auto it = e.find("tid");
    EMBER_CHECK(it != e.end() && it->is_number_integer(), where, ": traceEvents[", i,
                "] has no integer 'tid'");
    const int64_t tid = it->get<int64_t>();
    EMBER_CHECK(tid >= 1 && tid <= 4096, where, ": traceEvents[", i, "] has tid ", tid,
                " (ember writes 1 to 4096)");
    return int(tid - 1);
}

std::string string_or(const Json& o, const char* key) {
    const auto it = o.find(key);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

double number_or(const Json& o, const char* key) {
    const auto it = o.find(key);
    return it != o.end() && it->is_number() ? it->get<double>() : 0.0;
}

Trace parse_trace(const Json& doc, const std::string& where) {
    EMBER_CHECK(doc.is_object(), where, ": not a JSON object");
    const auto events = doc.find("traceEvents");
    EMBER_CHECK(events != doc.end() && events->is_array(), where,
                ": no 'traceEvents' array (not a Chrome trace)");
    Trace t;
    if (const auto other = doc.find("otherData"); other != doc.end() && other->is_object())
        if (const auto ember = other->find("ember"); ember != other->end() && ember->is_object()) {
            t.info.title = string_or(*ember, "title");
            if (const auto l = ember->find("limits"); l != ember->end() && l->is_object()) {
                t.info.limits.device = string_or(*l, "device");
                t.info.limits.gemm_gflops = number_or(*l, "gemm_gflops");
                t.info.limits.copy_gbps = number_or(*l, "copy_gbps");
            }
        }
    using V = Json::value_t;
    auto grow = [&](int track) {
        if (t.tracks.size() <= size_t(track)) t.tracks.resize(size_t(track) + 1);
    };
    for (size_t i = 0; i < events->size(); ++i) {
        const Json& e = (*events)[i];
        EMBER_CHECK(e.is_object(), where, ": traceEvents[", i, "] is not an object");
        const std::string ph = field(e, "ph", V::string, i, where).get<std::string>();
        if (ph == "M") {
            if (string_or(e, "name") != "thread_name") continue;
            const int track = track_of(e, i, where);
            grow(track);
            if (const auto a = e.find("args"); a != e.end() && a->is_object())
                t.tracks[size_t(track)] = string_or(*a, "name");
        } else if (ph == "X") {
            TraceEvent x;
            x.name = field(e, "name", V::string, i, where).get<std::string>();
            x.category = string_or(e, "cat");
            x.start_us = field(e, "ts", V::number_float, i, where).get<double>();
            x.dur_us = field(e, "dur", V::number_float, i, where).get<double>();
            EMBER_CHECK(x.dur_us >= 0, where, ": traceEvents[", i, "] has a negative duration");
            x.track = track_of(e, i, where);
            if (const auto a = e.find("args"); a != e.end() && a->is_object()) {
                x.signature = string_or(*a, "shapes");
                x.device = string_or(*a, "device");
                x.flops = number_or(*a, "flops");
                x.bytes = number_or(*a, "bytes");
            }
            grow(x.track);
            t.events.push_back(std::move(x));
        } else if (ph == "C") {
            CounterEvent c;
            c.name = field(e, "name", V::string, i, where).get<std::string>();
            c.ts_us = field(e, "ts", V::number_float, i, where).get<double>();
            for (const auto& [k, v] : field(e, "args", V::object, i, where).items())
                if (v.is_number()) c.values.emplace_back(k, v.get<double>());
            t.counters.push_back(std::move(c));
        }
    }
    return t;
}

}  // namespace

Trace read_chrome_trace(const std::string& path) {
    const std::string where = "read_chrome_trace: '" + path + "'";
    const RegularFile file = open_regular_file(path, where);
    EMBER_CHECK(file.size <= kMaxTraceBytes, where, ": ", file.size,
                " bytes is larger than a trace ember writes (at most ", kMaxTraceBytes, ")");
    std::string text(file.size, '\0');
    read_exact(file.fd.get(), text.data(), file.size, 0, where);
    const Json doc = Json::parse(text, nullptr, false);
    EMBER_CHECK(!doc.is_discarded(), where, ": not valid JSON");
    return parse_trace(doc, where);
}

}  // namespace ember::kernels
