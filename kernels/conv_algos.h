// How conv2d on CUDA picks its cuDNN algorithm (docs/tips.md #7): the two switches,
// the per-device cache of choices, and the text file that carries the cache
// from one run to the next. Plain C++, compiled in every build: without CUDA
// the caches stay empty and the switches only hold their value. The cuDNN
// side that fills the cache is kernels/cuda/conv.cpp; docs/cuda.md,
// "Convolution (cuDNN)". Test: tests/kernels/test_conv.cpp (format, cache),
// tests/cuda/test_cuda_conv.cpp (on a GPU).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../core/cuda_context.h"
#include "../core/dtype.h"
#include "conv.h"

namespace ember {

// The switches and save/load/clear are declared in core/cuda_context.h
// (with set_allow_tf32) and defined in kernels/conv_algos.cpp.

namespace kernels {

enum class ConvDirection : uint8_t { forward, backward_data, backward_filter };
/// "forward", "backward_data", "backward_filter".
const char* conv_direction_name(ConvDirection d);

/// What one cached choice is for: a direction of one convolution (the image
/// count of the call cuDNN sees, which may be a chunk of the batch), its dtype
/// and the modes it was chosen under.
struct ConvAlgoKey {
    ConvDirection direction = ConvDirection::forward;
    DType dtype = DType::f32;
    int64_t n = 0, c = 0, h = 0, w = 0, o = 0, kh = 0, kw = 0;
    int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
    bool deterministic = false;
    bool benchmark = true;       // chosen by timing (true) or by cuDNN's heuristic
    bool channels_last = false;  // NHWC tensors and filter (false: NCHW)
    friend auto operator<=>(const ConvAlgoKey&, const ConvAlgoKey&) = default;
};

ConvAlgoKey conv_algo_key(ConvDirection direction, DType dtype, const Conv2dShape& s,
                          bool deterministic, bool benchmark, bool channels_last = false);

/// A workspace size not known yet: an entry read from a file, until its first use.
inline constexpr size_t kWorkspaceUnknown = ~size_t(0);

/// The choice: cuDNN's algorithm enum (cudnnConvolution{Fwd,BwdData,
/// BwdFilter}Algo_t) and math type (cudnnMathType_t) as ints, and the
/// workspace bytes the pair needs.
struct ConvAlgoChoice {
    int algo = 0;
    int math = 0;
    size_t workspace = kWorkspaceUnknown;
    friend bool operator==(const ConvAlgoChoice&, const ConvAlgoChoice&) = default;
};

/// One device's choices. Thread-safe.
class ConvAlgoCache {
  public:
    std::optional<ConvAlgoChoice> find(const ConvAlgoKey& key) const;
    void put(const ConvAlgoKey& key, const ConvAlgoChoice& choice);
    void erase(const ConvAlgoKey& key);
    void clear();
    size_t size() const;
    std::vector<std::pair<ConvAlgoKey, ConvAlgoChoice>> entries() const;

  private:
    mutable std::mutex mutex_;
    std::map<ConvAlgoKey, ConvAlgoChoice> map_;
};

/// The cache of cuda:index, created on first use and kept for the life of the
/// process (beside the device's CudaContext, as its handles are).
ConvAlgoCache& conv_algo_cache(int index);

/// One line of the file: the GPU's name (CudaDeviceProperties::name), a key
/// and its choice (algo and math; the workspace is not stored).
struct ConvAlgoRecord {
    std::string device;
    ConvAlgoKey key;
    ConvAlgoChoice choice;
};

// Note [Conv algorithm file]
// A text file, one choice per line, grouped under the device it was timed on:
//
//     ember-conv-algorithms 1
//     device NVIDIA H200
//     forward f32 x=8,3,32,32 w=16,3,3,3 stride=1,1 padding=1,1 dilation=1,1 groups=1
//     deterministic=0 benchmark=1 algo=1 math=3
//
// The first line names the format and its version. `device` lines take the
// rest of the line as the name. An entry is its direction, dtype and every
// key=value field exactly once, in any order: the input [n, c, h, w], the
// weight [o, c / groups, kh, kw] and the window, as conv2d's front checks
// them; algo and math are cuDNN's enum values. One field may be left out:
// channels_last=1 marks a choice for NHWC tensors and filter (absent: NCHW).
// Blank lines and lines starting with '#' are skipped. Anything else is an
// error naming the line.

/// The file's text for `records`, grouped by device in the order given.
std::string format_conv_algorithms(const std::vector<ConvAlgoRecord>& records);
/// Parses and validates a file's text; `origin` (the path) leads each error.
std::vector<ConvAlgoRecord> parse_conv_algorithms(const std::string& text,
                                                  const std::string& origin);

}  // namespace kernels
}  // namespace ember
