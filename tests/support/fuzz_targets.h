// ember's fuzz targets: each takes arbitrary bytes, feeds them to a parser of
// outside input, and returns 0. An ember::Error is the expected answer to bad
// bytes and is caught inside; anything else — another exception, a crash, a
// sanitizer report, a hang — is a bug. The same functions run under
// libFuzzer (tools/dev fuzz, fuzz_main.cpp) and, in every build, over the
// seed corpus and the saved crash inputs (test_fuzz_regressions.cpp).
// Guide: docs/reliability.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ember::fuzz {

/// The bytes as a safetensors file: load_safetensors, and for a file that
/// loads, a save and a load again that must give the same tensors.
int safetensors(const uint8_t* data, size_t size);

/// The bytes as an IDX file: read_idx_info, read_idx and MmapDataset::from_idx
/// (mapped and copy_on_read). A first byte with its low bit set wraps the
/// rest in a gzip stream first, so that mutations reach the gzip path's
/// header checks instead of breaking the deflate stream.
int idx(const uint8_t* data, size_t size);

/// The bytes as arguments to from_blob and as_strided over a 4 KiB buffer,
/// then to the views (slice, narrow, select, expand, permute, transpose,
/// unsqueeze, squeeze, view, reshape); every tensor that is accepted is read
/// in full, so a view reaching past its storage is a sanitizer report.
int tensor_args(const uint8_t* data, size_t size);

/// The bytes as checkpoint state: the first byte picks GradScaler,
/// a Warmup+OneCycle schedule over SGD, or Adam; the rest is the JSON given
/// to its load_state, which must load or throw, changing nothing on a throw.
int checkpoint_state(const uint8_t* data, size_t size);

/// The bytes as one of the files `ember train` reads besides tensors: an
/// even first byte makes the rest a config file (config_args, then the
/// train command's CLI11 options and validate), an odd one the JSON of a
/// checkpoint (parse_checkpoint_meta; bit 1: the run has a loss scaler).
int train_files(const uint8_t* data, size_t size);

/// A target by name, for the drivers.
struct Target {
    const char* name;
    int (*run)(const uint8_t*, size_t);
};
inline constexpr Target kTargets[] = {{"safetensors", safetensors},
                                      {"idx", idx},
                                      {"tensor_args", tensor_args},
                                      {"checkpoint_state", checkpoint_state},
                                      {"train_files", train_files}};

/// Seed inputs for a target (fuzz_seeds.cpp): valid files of every kind the
/// reader accepts and the malformed cases of the ordinary tests.
std::vector<std::vector<uint8_t>> seeds(const std::string& target);

/// A scratch file for a target's input, in /dev/shm when it exists (no disk
/// I/O per input), unique to this process; rewritten on each call.
std::string scratch_file(const std::string& tag, const uint8_t* data, size_t size);

}  // namespace ember::fuzz
