// CPU 2-d pooling kernels, forward and backward (declarations); the loops are
// in kernels/cpu/pool.cpp.
// Views in, no Tensor.
#pragma once

#include <cstdint>
#include <optional>

#include "../pool_args.h"
#include "../view.h"

namespace ember::kernels::cpu {

/// values [N, C, OH, OW] = max over each window of input [N, C, H, W] (any
/// strides; padding never wins; NaN propagates), and indices (i64, same
/// shape) = y·W + x of the chosen element within its H×W plane (the first
/// maximum, or the last NaN, as PyTorch). values and indices contiguous.
void max_pool2d(const View& values, const View& indices, const View& input, const Pool2dWindow& w);

/// out [N, C, OH, OW] = mean over each window, which is clipped to the input
/// padded by (ph, pw); the divisor counts padding when count_include_pad, else
/// only the input elements (PyTorch's rule). Dilation must be 1.
void avg_pool2d(const View& out, const View& input, const Pool2dWindow& w, bool count_include_pad);

/// out [N, C, OH, OW] = mean of input rows [⌊y·H/OH⌋, ⌈(y+1)·H/OH⌉) and the
/// same for columns. A channels-last input is summed a pixel's channels at a
/// time, in the same order (the same bits).
void adaptive_avg_pool2d(const View& out, const View& input);

// The backwards: grad_input [N, C, H, W] is contiguous, of grad_out's
// accumulation type (f32 for f16/bf16 grad_out, else grad_out's dtype), and
// overwritten: each plane is zeroed, then accumulated (+=) into in output
// order by one thread (deterministic). grad_out [N, C, OH, OW] any strides.

/// grad_input[n, c, indices[n, c, q]] += grad_out[n, c, q] for every output
/// position q; duplicate indices add. indices i64, grad_out's shape, any
/// strides. Returns the first index outside [0, H·W) (skipped), or nullopt.
std::optional<int64_t> max_pool2d_backward(const View& grad_input, const View& grad_out,
                                           const View& indices);

/// Adds grad_out / divisor to every element of each window, with
/// avg_pool2d's clipping and divisor rules. Dilation must be 1.
void avg_pool2d_backward(const View& grad_input, const View& grad_out, const Pool2dWindow& w,
                         bool count_include_pad);

/// Adds grad_out / window size to every element of each adaptive window.
/// Or, where the windows tile the plane (H % OH == 0 and W % OW == 0),
/// grad_input may instead be of grad_out's dtype with channels adjacent
/// (strides[1] == 1, a channels-last input's layout): each element is then
/// written once, grad_out / window size rounded to the dtype — the values
/// the accumulating path's planes hold, converted.
void adaptive_avg_pool2d_backward(const View& grad_input, const View& grad_out);

}  // namespace ember::kernels::cpu
