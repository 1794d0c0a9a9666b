// Fuzz target: safetensors files (nn/safetensors.cpp, nn/safetensors_header.cpp).
// Any bytes must load or throw ember::Error; what loads must account for
// every byte of the file and come back unchanged through a save and a load.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "support/fuzz_targets.h"
#include "nn/safetensors.h"

namespace ember::fuzz {

namespace {

[[noreturn]] void broken(const char* what) {
    std::fprintf(stderr, "fuzz safetensors: %s\n", what);
    std::abort();
}

bool same_bytes(const Tensor& a, const Tensor& b) {
    const size_t n = size_t(a.numel() * a.element_size());
    return n == size_t(b.numel() * b.element_size()) &&
           (n == 0 || std::memcmp(a.data_ptr(), b.data_ptr(), n) == 0);
}

}  // namespace

int safetensors(const uint8_t* data, size_t size) {
    const std::string in = scratch_file("in.safetensors", data, size);
    nn::TensorFile f;
    try {
        f = nn::load_safetensors(in);
    } catch (const Error&) {
        return 0;
    }
    uint64_t header = 0;
    std::memcpy(&header, data, 8);  // it loaded, so there are 8 bytes
    uint64_t total = 8 + header;
    for (const auto& [name, t] : f.tensors) total += uint64_t(t.numel() * t.element_size());
    if (total != size) broken("the loaded tensors do not account for every byte");

    // Whatever loads is valid to save, and saves to what loads again.
    const std::string out = scratch_file("out.safetensors", nullptr, 0);
    nn::TensorFile g;
    try {
        nn::save_safetensors(out, f.tensors, f.metadata);
        g = nn::load_safetensors(out);
    } catch (const Error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        broken("a file that loaded could not be saved and loaded again");
    }
    if (g.metadata != f.metadata || g.tensors.size() != f.tensors.size())
        broken("the round trip changed the metadata or the tensor count");
    for (size_t i = 0; i < f.tensors.size(); ++i) {
        const Tensor &a = f.tensors[i].second, &b = g.tensors[i].second;
        if (f.tensors[i].first != g.tensors[i].first || a.dtype() != b.dtype() ||
            a.shape() != b.shape() || !same_bytes(a, b))
            broken("the round trip changed a tensor");
    }
    return 0;
}

}  // namespace ember::fuzz
