// safetensors files: reading (the whole header validated first, then each
// tensor's span read straight into a new host tensor) and atomic writing
// (core/atomic_file.h: a temporary file beside the target, fsync, rename).
// Header rules: nn/safetensors_header.cpp; format: docs/safetensors.md.
#include "nn/safetensors.h"

#include <bit>
#include <set>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/file.h"
#include "kernels/copy.h"
#include "nn/safetensors_header.h"

namespace ember::nn {

// The length field and the tensor bytes are little-endian in the file and are
// copied as they are; f16 and bf16 are raw 16-bit patterns on both sides.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O copies bytes as they are: it needs a little-endian host");

using detail::quote;

namespace {

constexpr const char* kMetadataKey = "__metadata__";

// A C++ bool holding any byte but 0 or 1 is undefined behaviour to read.
void check_bool_bytes(const Tensor& t, const std::string& name, const std::string& context) {
    const auto* b = static_cast<const unsigned char*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel(); ++i)
        EMBER_CHECK(b[i] <= 1, context, ": tensor ", quote(name), ": BOOL element ", i,
                    " is byte ", int(b[i]), "; it must be 0 or 1");
}

// Valid UTF-8, as JSON strings must be; nlohmann's serializer is the judge.
bool valid_utf8(const std::string& s) {
    try {
        (void)nlohmann::json(s).dump();
        return true;
    } catch (const nlohmann::json::exception&) {
        return false;
    }
}

// The JSON header (keys in the order given, "__metadata__" first), padded
// with spaces so that the data buffer starts at an 8-byte aligned offset.
std::string make_header(const std::vector<std::pair<std::string, Tensor>>& tensors,
                        const std::map<std::string, std::string>& metadata) {
    nlohmann::ordered_json h = nlohmann::ordered_json::object();
    if (!metadata.empty()) h[kMetadataKey] = metadata;
    uint64_t offset = 0;
    for (const auto& [name, t] : tensors) {
        const uint64_t nbytes = uint64_t(t.numel()) * uint64_t(t.element_size());
        h[name] = {{"dtype", detail::safetensors_dtype_name(t.dtype())},
                   {"shape", t.shape()},
                   {"data_offsets", {offset, offset + nbytes}}};
        offset += nbytes;
    }
    std::string text = h.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // 8 + size is then a multiple of 8
    return text;
}

}  // namespace

const Tensor* TensorFile::find(const std::string& name) const {
    for (const auto& [n, t] : tensors)
        if (n == name) return &t;
    return nullptr;
}

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
    const std::string context = "save_safetensors: " + quote(path);
    // Everything that can be checked is checked before the file is created.
    EMBER_CHECK(!path.empty(), context, ": the path is empty");
    std::set<std::string> names;
    for (const auto& [name, t] : tensors) {
        EMBER_CHECK(!name.empty(), context, ": a tensor has an empty name");
        EMBER_CHECK(name != kMetadataKey, context, ": '", kMetadataKey,
                    "' is reserved for the metadata and cannot name a tensor");
        EMBER_CHECK(valid_utf8(name), context, ": tensor name ", quote(name),
                    " is not valid UTF-8");
        EMBER_CHECK(names.insert(name).second, context, ": tensor ", quote(name),
                    " appears twice");
        EMBER_CHECK(t.defined(), context, ": tensor ", quote(name), " is undefined");
    }
    for (const auto& [key, value] : metadata)
        EMBER_CHECK(valid_utf8(key) && valid_utf8(value), context, ": __metadata__ entry ",
                    quote(key), " is not valid UTF-8");
    const std::string header = make_header(tensors, metadata);

    AtomicFile file(path, context);
    const uint64_t n = header.size();
    file.write(&n, 8);
    file.write(header.data(), header.size());
    for (const auto& [name, t] : tensors) {
        if (t.numel() == 0) continue;
        Tensor host = t;
        if (!t.device().is_cpu() || !t.is_contiguous()) {  // one tensor's copy at a time
            host = empty(t.shape(), {.dtype = t.dtype()});
            kernels::copy(host, t);
        }
        file.write(host.data_ptr(), size_t(host.numel() * host.element_size()));
    }
    file.commit();
}

TensorFile load_safetensors(const std::string& path) {
    const std::string context = "load_safetensors: " + quote(path);
    const RegularFile file = open_regular_file(path, context);
    const uint64_t file_size = file.size;
    EMBER_CHECK(file_size >= 8, context, ": the file is ", file_size,
                " bytes, too short for the 8-byte header length (truncated?)");

    uint64_t n = 0;  // little-endian on disk and on the host
    read_exact(file.fd.get(), &n, 8, 0, context);
    EMBER_CHECK(n > 0, context, ": the header length is 0");
    EMBER_CHECK(n <= kSafetensorsMaxHeaderBytes, context, ": the header length ", n,
                " exceeds the limit of ", kSafetensorsMaxHeaderBytes, " bytes");
    EMBER_CHECK(n <= file_size - 8, context, ": the header length ", n, " exceeds the ",
                file_size - 8, " bytes after the length field (is the file truncated?)");
    std::string text(size_t(n), '\0');
    read_exact(file.fd.get(), text.data(), n, 8, context);
    // Validates against the real buffer size, so no span asks for more bytes than the file has.
    const detail::SafetensorsHeader header =
        detail::parse_safetensors_header(text, file_size - 8 - n, context);

    TensorFile out;
    out.metadata = header.metadata;
    for (const detail::SafetensorsEntry& e : header.entries) {
        Tensor t = empty(e.shape, {.dtype = e.dtype});
        read_exact(file.fd.get(), t.data_ptr(), e.end - e.begin, 8 + n + e.begin, context);
        if (e.dtype == DType::boolean) check_bool_bytes(t, e.name, context);
        out.tensors.emplace_back(e.name, std::move(t));
    }
    return out;
}

}  // namespace ember::nn
