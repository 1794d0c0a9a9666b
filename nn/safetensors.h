// Named tensors in the safetensors file format (the format PyTorch and Hugging
// Face tools read), the layer under nn::save / nn::load and checkpoints. The
// reader validates every byte of the header before it allocates tensor memory;
// the writer replaces the target file atomically. Format: docs/safetensors.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "../core/tensor.h"

namespace ember::nn {

/// Largest header (the JSON part) the reader accepts, in bytes, as the
/// format's reference reader: it bounds what a hostile length field can ask for.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

/// What a safetensors file holds: named tensors and the optional string ->
/// string "__metadata__" table.
struct TensorFile {
    /// Tensors in the order of their data in the file (for files ember writes,
    /// the order they were given to save_safetensors). Loaded tensors are
    /// contiguous host tensors, each with its own storage.
    std::vector<std::pair<std::string, Tensor>> tensors;
    std::map<std::string, std::string> metadata;

    /// The tensor called `name`, or nullptr when the file has none.
    const Tensor* find(const std::string& name) const;
};

/// Writes `tensors` (in the order given, data in that order) and `metadata` to
/// `path` in the safetensors format. Dtypes f64, f32, f16, bf16, i64, i32, u8
/// and bool map to F64 F32 F16 BF16 I64 I32 U8 BOOL; device tensors are copied
/// to the host and non-contiguous ones are written in row-major order. Names
/// must be non-empty, valid UTF-8, unique and not "__metadata__".
///
/// Atomic (core/atomic_file.h): the bytes go to a temporary file beside
/// `path` (named after atomic_temp_prefix), which is flushed (fsync) and
/// renamed over `path`, then the directory is flushed. On any failure the
/// temporary file is removed, `path` keeps its previous content and an
/// ember::Error names the path and the reason; an empty path is refused
/// first. A symbolic link is written through: the file it leads to is
/// replaced and the link stays. A successful save also removes temporary
/// files that killed saves of the same file left behind.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Reads a safetensors file. Everything is validated before tensor memory is
/// allocated: the header length against kSafetensorsMaxHeaderBytes and the
/// file size; the JSON (an object; no duplicate keys; each entry exactly
/// dtype, shape and data_offsets; "__metadata__" strings only); the dtypes;
/// shapes (non-negative integers, element count and byte size without
/// overflow) against their byte spans; and the spans, which must tile the
/// data buffer exactly, without gaps, overlaps or trailing bytes. BOOL data
/// must hold only bytes 0 and 1. A malformed or truncated file is an
/// ember::Error that names the path and what is wrong; so is anything but a
/// regular file (a named pipe or a device is refused without being opened,
/// so the call never blocks) and a /proc-style file that reports 0 bytes.
TensorFile load_safetensors(const std::string& path);

}  // namespace ember::nn
