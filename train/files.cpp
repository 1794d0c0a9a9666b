// Atomic writes of small text files (config.toml, curves.svg, tokenizer.json)
// through core/atomic_file.h: the same writer as the weights and checkpoints.
#include "train/files.h"

#include "core/atomic_file.h"

namespace ember::train {

void write_file_atomic(const std::string& path, const std::string& content) {
    AtomicFile f(path, "cannot write " + path);
    f.write(content.data(), content.size());
    f.commit();
}

}  // namespace ember::train
