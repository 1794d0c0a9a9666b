// A model's weights to and from a safetensors file (opens unchanged in
// PyTorch: safetensors.torch.load_file). docs/safetensors.md.
#pragma once

#include <map>
#include <string>

#include "module.h"

namespace ember::nn {

/// Writes model.state_dict() (parameters and buffers, dotted names) to `path`
/// atomically; `metadata` goes into the file's "__metadata__".
void save(const Module& model, const std::string& path,
          const std::map<std::string, std::string>& metadata = {});
/// Reads `path` (fully validated) into the model with load_state_dict(strict).
void load(Module& model, const std::string& path, bool strict = true);

}  // namespace ember::nn
