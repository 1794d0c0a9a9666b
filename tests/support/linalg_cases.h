// The case records shared by the convolution and pooling tests (forward and
// backward), and PyTorch's output-size rule they are checked against.
#pragma once

#include <cstdint>

#include "kernels/conv.h"
#include "support.h"

namespace ember::test {

/// A conv2d case; `bias` only matters to the forward tests.
struct ConvCase {
    Shape input;   // [N, C, H, W]
    Shape weight;  // [O, C/groups, kH, kW]
    Int2 stride, padding, dilation;
    int64_t groups;
    bool bias = true;
};

/// A pooling case with its expected output shape, worked out by hand.
struct PoolCase {
    Shape input;  // [N, C, H, W]
    Int2 kernel, stride, padding, dilation;
    bool ceil_mode;
    Shape out;  // [N, C, OH, OW]
};

/// ⌊(in + 2p − d(k − 1) − 1) / s⌋ + 1: a convolution's output size along one dim.
inline int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

}  // namespace ember::test
