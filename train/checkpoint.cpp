// Checkpoints: the tensors of the model ("model.<name>") and the optimizer
// ("optim.<name>") and, under the metadata key "ember.checkpoint", a JSON with
// the position, the generator, and the optimizer's, schedule's and scaler's
// own state JSON. Format and fields: docs/train.md, "Checkpoints".
#include "train/checkpoint.h"

#include <nlohmann/json.hpp>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "kernels/profile.h"
#include "nn/safetensors.h"

namespace ember::train {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kKey = "ember.checkpoint";
constexpr int kVersion = 1;

// Splits the file's tensors by prefix ("model." / "optim.").
std::vector<std::pair<std::string, Tensor>> with_prefix(const nn::TensorFile& f,
                                                        const std::string& prefix) {
    std::vector<std::pair<std::string, Tensor>> out;
    for (const auto& [name, t] : f.tensors)
        if (name.rfind(prefix, 0) == 0) out.emplace_back(name.substr(prefix.size()), t);
    return out;
}

int64_t integer(const json& j, const char* key, int64_t lo) {
    EMBER_CHECK(j.contains(key) && j[key].is_number_integer() && j[key].get<int64_t>() >= lo,
                "'", key, "' is missing or not an integer >= ", lo);
    return j[key].get<int64_t>();
}

// CRC-32 (zlib's) of a tensor's bytes in row-major order, as 8 hex digits.
std::string checksum(const Tensor& t) {
    const Tensor h = t.to(Device::cpu()).contiguous();
    const uLong crc = crc32_z(0L, static_cast<const Bytef*>(h.data_ptr()),
                              size_t(h.numel()) * dtype_size(h.dtype()));
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08lx", (unsigned long)crc);
    return buf;
}

// checkpoint/step-<N>.safetensors: a kept checkpoint (--keep-checkpoints).
std::string step_file(const std::string& run_dir, int64_t step) {
    char name[48];
    std::snprintf(name, sizeof name, "step-%08lld.safetensors", (long long)step);
    return (fs::path(run_dir) / "checkpoint" / name).string();
}

// The kept checkpoints of a run, newest (highest step) first.
std::vector<std::pair<int64_t, std::string>> kept_checkpoints(const std::string& run_dir) {
    std::vector<std::pair<int64_t, std::string>> out;
    std::error_code ec;
    for (fs::directory_iterator it(fs::path(run_dir) / "checkpoint", ec), end; !ec && it != end;
         it.increment(ec)) {
        const std::string name = it->path().filename().string();
        long long step = -1;
        char tail[32] = {};
        if (std::sscanf(name.c_str(), "step-%lld.%31s", &step, tail) == 2 && step >= 0 &&
            std::string(tail) == "safetensors")
            out.emplace_back(int64_t(step), it->path().string());
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    return out;
}

std::string text(const json& j, const char* key) {
    EMBER_CHECK(j.contains(key) && j[key].is_string(), "'", key, "' is missing or not a string");
    return j[key].get<std::string>();
}

}  // namespace

std::string checkpoint_path(const std::string& run_dir) {
    return (fs::path(run_dir) / "checkpoint" / "state.safetensors").string();
}

void save_checkpoint(const std::string& run_dir, const Run& run, const Position& pos) {
    const kernels::ProfileRange range("checkpoint", "checkpoint.save");
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& [name, t] : run.model().state_dict()) tensors.emplace_back("model." + name, t);
    for (const auto& [name, t] : run.optimizer->state_tensors())
        tensors.emplace_back("optim." + name, t);
    const GeneratorState rng = default_generator().state();
    json meta = {{"version", kVersion},
                 {"model", run.task.name},
                 {"step", pos.step},
                 {"epoch", pos.epoch},
                 {"batch", pos.batch},
                 {"world_size", run.world_size()},
                 {"rng_seed", rng.seed},
                 {"rng_offset", rng.offset},
                 {"optimizer", run.optimizer->state_json()},
                 {"schedule", run.schedule->state_json()}};
    if (run.scaler) meta["scaler"] = run.scaler->state_json();
    const TrainConfig& c = run.config;
    meta["stream"] = {{"batch_size", c.batch_size},
                      {"limit", c.limit},
                      {"accumulate", c.accumulate},
                      {"seed", c.seed},
                      {"data", c.data},
                      {"epochs", c.epochs}};
    meta["next_lr"] = run.schedule->lr(0);
    // Accuracy: -1 before the first evaluation; loss: null.
    if (run.task.metric == Metric::accuracy)
        meta["best_accuracy"] = pos.best.value_or(-1);
    else
        meta["best_loss"] = pos.best ? json(*pos.best) : json(nullptr);
    std::error_code ec;
    fs::create_directories(fs::path(checkpoint_path(run_dir)).parent_path(), ec);
    EMBER_CHECK(!ec, "cannot create ", fs::path(checkpoint_path(run_dir)).parent_path().string(),
                ": ", ec.message());
    // The task's own metadata (a text model's shape and tokenizer) too, so
    // that the checkpoint is as self-describing as the weights files.
    // A CRC-32 per tensor: a bit flipped on disk is found on resume, not trained on.
    json sums = json::object();
    for (const auto& [name, t] : tensors) sums[name] = checksum(t);
    meta["checksums"] = sums;
    std::map<std::string, std::string> file_meta = run.task.metadata;
    file_meta[kKey] = meta.dump();
    const std::string path = checkpoint_path(run_dir);
    nn::save_safetensors(path, tensors, file_meta);
    keep_checkpoints(run_dir, pos.step, run.config.keep_checkpoints);
}

void keep_checkpoints(const std::string& run_dir, int64_t step, int64_t keep) {
    std::error_code ec;
    if (keep > 1) {
        // The newest as step-N too: a hard link to state.safetensors (both
        // complete files; a copy where links are not supported).
        const std::string kept = step_file(run_dir, step);
        fs::remove(kept, ec);
        fs::create_hard_link(checkpoint_path(run_dir), kept, ec);
        if (ec) {
            const std::string tmp = kept + ".partial";
            fs::copy_file(checkpoint_path(run_dir), tmp, fs::copy_options::overwrite_existing, ec);
            EMBER_CHECK(!ec, "cannot keep checkpoint ", kept, ": ", ec.message());
            fs::rename(tmp, kept, ec);
            EMBER_CHECK(!ec, "cannot keep checkpoint ", kept, ": ", ec.message());
        }
    }
    // Only the newest `keep` stay (the one just written counts); with keep = 1
    // state.safetensors alone is the checkpoint, and no step-N file stays.
    const auto all = kept_checkpoints(run_dir);
    for (size_t i = keep > 1 ? size_t(keep) : 0; i < all.size(); ++i) fs::remove(all[i].second, ec);
}

bool improves(Metric metric, const Evaluation& e, const std::optional<double>& best) {
    return !best || (metric == Metric::accuracy ? e.accuracy > *best : e.loss < *best);
}

double score(Metric metric, const Evaluation& e) {
    return metric == Metric::accuracy ? e.accuracy : e.loss;
}

namespace {

// A check of the run's configuration against the checkpoint: failing, a
// ResumeMismatch (no fallback to an older checkpoint).
template <class... Args>
void fits(bool ok, const Args&... what) {
    if (!ok) throw ResumeMismatch(str(what...));
}

}  // namespace

CheckpointMeta parse_checkpoint_meta(const std::string& text_json, const CheckpointExpect& expect) {
    const std::string& model = expect.model;
    const int64_t batches_per_epoch = expect.batches_per_epoch;
    const bool scaler = expect.scaler;
    const int world_size = expect.world_size;
    json meta;
    try {
        meta = json::parse(text_json);
    } catch (const json::exception& e) {
        EMBER_FAIL("the checkpoint's JSON does not parse: ", e.what());
    }
    EMBER_CHECK(meta.is_object() && integer(meta, "version", 1) == kVersion,
                "unsupported checkpoint version");
    fits(text(meta, "model") == model, "the checkpoint is of model ", text(meta, "model"),
                ", the run's is ", model);
    // Absent in checkpoints of runs without --ddp written before it existed: 1.
    const int64_t saved_world = meta.contains("world_size") ? integer(meta, "world_size", 1) : 1;
    fits(saved_world == world_size, "the checkpoint was written by ", saved_world,
                " rank(s) and this run has ", world_size,
                ": resume with the same world size (each rank's shard of the data depends on it)");
    CheckpointMeta m;
    m.position.step = integer(meta, "step", 0);
    m.position.epoch = integer(meta, "epoch", 0);
    m.position.batch = integer(meta, "batch", 0);
    if (expect.metric == Metric::accuracy) {
        EMBER_CHECK(meta.contains("best_accuracy") && meta["best_accuracy"].is_number(),
                    "'best_accuracy' is missing");
        const double best = meta["best_accuracy"].get<double>();
        if (best >= 0) m.position.best = best;
    } else {
        EMBER_CHECK(meta.contains("best_loss") &&
                        (meta["best_loss"].is_number() || meta["best_loss"].is_null()),
                    "'best_loss' is missing");
        if (meta["best_loss"].is_number()) m.position.best = meta["best_loss"].get<double>();
    }
    // The data stream: which sample each step sees depends on these (absent
    // in checkpoints written before they were recorded).
    int64_t was_epochs = 0;  // the --epochs the checkpoint was written under (0: not recorded)
    if (meta.contains("stream") && expect.batch_size > 0) {
        const json& st = meta["stream"];
        EMBER_CHECK(st.is_object(), "'stream' must be an object");
        auto same = [&](const char* key, const char* flag, const json& now) {
            EMBER_CHECK(st.contains(key), "'stream' lacks '", key, "'");
            fits(st[key] == now, flag, " ", now.dump(), " differs from the run's ",
                        st[key].dump(), ": resuming would change which samples the remaining "
                        "steps see (some trained twice, some skipped); resume with ", flag, " ",
                        st[key].dump(), " or start a new run");
        };
        same("batch_size", "--batch-size", expect.batch_size);
        same("limit", "--limit", expect.limit);
        same("accumulate", "--accumulate", expect.accumulate);
        same("seed", "--seed", expect.seed);
        same("data", "--data", expect.data);
        // The LR schedule spans the run: another length changes every
        // remaining step's LR, which only --extend asks for.
        if (st.contains("epochs")) {
            EMBER_CHECK(st["epochs"].is_number_integer() && st["epochs"].get<int64_t>() >= 1,
                        "'stream' has a bad 'epochs'");
            was_epochs = st["epochs"].get<int64_t>();
        }
    }

    EMBER_CHECK(m.position.batch <= batches_per_epoch, "batch ", m.position.batch,
                " is past the epoch's ", batches_per_epoch, " batches (another --batch-size?)");
    if (expect.accumulate > 0) {  // the step is where the epoch and batch say it is
        const int64_t acc = expect.accumulate;
        const int64_t steps_per_epoch = (batches_per_epoch + acc - 1) / acc;
        const int64_t want = m.position.epoch * steps_per_epoch + (m.position.batch + acc - 1) / acc;
        EMBER_CHECK(m.position.step == want, "step ", m.position.step, " does not match epoch ",
                    m.position.epoch, ", batch ", m.position.batch, " (expected step ", want, ")");
    }
    if (expect.epochs > 0)
        fits(m.position.epoch < expect.epochs ||
                        (m.position.epoch == expect.epochs && m.position.batch == 0),
                    "--epochs ", expect.epochs, " is below the ", m.position.epoch,
                    " epoch(s) the run has trained",
                    m.position.batch > 0 ? " and begun" : "", "; give --epochs ",
                    m.position.epoch + 1, " or more (the total, not more epochs)");
    if (was_epochs > 0 && expect.epochs > 0 && was_epochs != expect.epochs) {
        fits(expect.extend, "--epochs ", expect.epochs, " differs from the run's ",
                    was_epochs, ": the LR schedule spans the run, so the remaining steps would "
                    "train at other LRs; give --extend to re-span it over ", expect.epochs,
                    " epochs, or resume with --epochs ", was_epochs);
        EMBER_CHECK(meta.contains("next_lr") && meta["next_lr"].is_number(), "'next_lr' is missing");
        m.position.extended = {.epochs = was_epochs, .next_lr = meta["next_lr"].get<double>()};
    }
    EMBER_CHECK(meta.contains("rng_seed") && meta["rng_seed"].is_number_unsigned() &&
                    meta.contains("rng_offset") && meta["rng_offset"].is_number_unsigned(),
                "the generator state is missing");
    m.rng_seed = meta["rng_seed"].get<uint64_t>();
    m.rng_offset = meta["rng_offset"].get<uint64_t>();
    fits(scaler == meta.contains("scaler"), "the checkpoint was written ",
                meta.contains("scaler") ? "with" : "without", " loss scaling; the run has ",
                scaler ? "it" : "none");
    m.optimizer = text(meta, "optimizer");
    m.schedule = text(meta, "schedule");
    if (scaler) m.scaler = text(meta, "scaler");
    return m;
}

namespace {

// Restores `run` from the checkpoint file at `path`; an Error says why it
// cannot be used (unreadable, a checksum that does not match, a run it does
// not fit). Checked whole before anything of the run changes but the parts'
// own loads, each of which checks before it commits.
Position load_one(const std::string& path, Run& run) {
    const nn::TensorFile file = nn::load_safetensors(path);
    const auto it = file.metadata.find(kKey);
    EMBER_CHECK(it != file.metadata.end(), "no '", kKey, "' metadata: not an ember checkpoint");
    const CheckpointMeta meta = parse_checkpoint_meta(
        it->second, {.model = run.task.name,
                     .batches_per_epoch = run.batches_per_epoch,
                     .scaler = bool(run.scaler),
                     .world_size = run.world_size(),
                     .metric = run.task.metric,
                     .batch_size = run.config.batch_size,
                     .limit = run.config.limit,
                     .accumulate = run.config.accumulate,
                     .seed = run.config.seed,
                     .data = run.config.data,
                     .epochs = run.config.epochs,
                     .extend = run.config.extend});
    // Every tensor's CRC-32 (absent in checkpoints written before them).
    const json j = json::parse(it->second, nullptr, false);
    if (j.is_object() && j.contains("checksums")) {
        const json& sums = j["checksums"];
        EMBER_CHECK(sums.is_object() && sums.size() == file.tensors.size(),
                    "the checksums do not cover the file's ", file.tensors.size(), " tensors");
        for (const auto& [name, t] : file.tensors) {
            EMBER_CHECK(sums.contains(name) && sums[name].is_string(), "no checksum for '", name, "'");
            EMBER_CHECK(sums[name].get<std::string>() == checksum(t), "the checksum of '", name,
                        "' does not match: the file was damaged after it was written");
        }
    }
    run.optimizer->load_state(with_prefix(file, "optim."), meta.optimizer);
    run.schedule->load_state(meta.schedule);
    if (run.scaler) run.scaler->load_state(meta.scaler);
    run.model().load_state_dict(with_prefix(file, "model."));
    default_generator().set_state({meta.rng_seed, meta.rng_offset});
    return meta.position;
}

}  // namespace

Position load_checkpoint(const std::string& run_dir, Run& run) {
    const std::string path = checkpoint_path(run_dir);
    // The newest first, then the kept ones from newest to oldest (those that
    // are the newest itself, as a link, skipped).
    std::vector<std::string> candidates;
    std::error_code ec;
    if (fs::exists(path, ec)) candidates.push_back(path);
    for (const auto& [step, p] : kept_checkpoints(run_dir))
        if (candidates.empty() || !fs::equivalent(p, path, ec)) candidates.push_back(p);
    EMBER_CHECK(!candidates.empty(), "resume: ", run_dir, " has no checkpoint (", path,
                " is missing): nothing to resume");
    std::string failures;
    for (const std::string& c : candidates) {
        try {
            const Position pos = load_one(c, run);
            if (!failures.empty() && run.lead())
                std::fprintf(stderr, "ember train: warning: %s; resuming from %s (step %lld)\n",
                             failures.c_str(), c.c_str(), (long long)pos.step);
            return pos;
        } catch (const ResumeMismatch& e) {
            // Intact but not this run's: an older one must not stand in.
            EMBER_FAIL("resume from ", run_dir, ": ", c, ": ", e.what());
        } catch (const Error& e) {
            // A half-restored run is restored whole by the next candidate.
            failures += (failures.empty() ? "" : "; ") + std::string("checkpoint ") + c +
                        " cannot be used (" + e.what() + ")";
        }
    }
    EMBER_FAIL("resume from ", run_dir, ": ", failures,
               candidates.size() == 1 ? "; no older checkpoint to fall back to (--keep-checkpoints)"
                                      : "");
}

std::optional<std::string> recorded_model(const std::string& path) {
    const nn::TensorFile file = nn::load_safetensors(path);
    if (const auto it = file.metadata.find("ember.model"); it != file.metadata.end())
        return it->second;
    if (const auto it = file.metadata.find(kKey); it != file.metadata.end()) {
        const json meta = json::parse(it->second, nullptr, false);
        if (meta.is_object() && meta.contains("model") && meta["model"].is_string())
            return meta["model"].get<std::string>();
    }
    return std::nullopt;
}

void load_weights(nn::Module& model, const std::string& path) {
    const nn::TensorFile file = nn::load_safetensors(path);
    try {
        if (file.metadata.count(kKey))
            model.load_state_dict(with_prefix(file, "model."));
        else
            model.load_state_dict(file.tensors);
    } catch (const Error& e) {
        EMBER_FAIL("loading weights from ", path, ": ", e.what());
    }
}

}  // namespace ember::train
