// nn::save / nn::load: state_dict through the safetensors reader and writer.
#include "nn/serialize.h"

#include "nn/safetensors.h"

namespace ember::nn {

void save(const Module& model, const std::string& path,
          const std::map<std::string, std::string>& metadata) {
    save_safetensors(path, model.state_dict(), metadata);
}

void load(Module& model, const std::string& path, bool strict) {
    TensorFile file = load_safetensors(path);
    try {
        model.load_state_dict(file.tensors, strict);
    } catch (const Error& e) {
        EMBER_FAIL("loading '", path, "': ", e.what());
    }
}

}  // namespace ember::nn
