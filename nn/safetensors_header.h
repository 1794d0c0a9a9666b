// The safetensors header, parsed and validated without any file I/O: used by
// nn/safetensors.cpp, which reads the bytes and the tensor data around it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "../core/tensor.h"

namespace ember::nn::detail {

/// One tensor of a validated header: its data is bytes [begin, end) of the data buffer.
struct SafetensorsEntry {
    std::string name;
    DType dtype = DType::f32;
    Shape shape;
    uint64_t begin = 0;
    uint64_t end = 0;
};

/// A validated header: entries sorted by `begin` (ties keep header order), so
/// their spans tile the data buffer from 0 to its end.
struct SafetensorsHeader {
    std::vector<SafetensorsEntry> entries;
    std::map<std::string, std::string> metadata;
};

/// The format's name of a dtype: "F32", "BF16", "BOOL", ...
const char* safetensors_dtype_name(DType t);

/// `s` in single quotes for messages, with control bytes as \xNN and long
/// strings cut short: names come from files that may be hostile.
std::string quote(const std::string& s);

/// Parses the JSON header `text` and checks every rule of the format against
/// a data buffer of `buffer_size` bytes (docs/safetensors.md). Throws
/// ember::Error with `context` (the caller and path) leading the message.
SafetensorsHeader parse_safetensors_header(const std::string& text, uint64_t buffer_size,
                                           const std::string& context);

}  // namespace ember::nn::detail
