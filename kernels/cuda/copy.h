// CUDA copy/cast/fill kernels on Views, and memory moves between devices.
#pragma once

#include <cstddef>

#include "../../core/cuda_context.h"
#include "../../core/device.h"
#include "../view.h"

namespace ember::kernels::cuda {

/// dst = cast(src) on one device; both views have the same shape.
void copy(const View& dst, const View& src, StreamRef stream);
/// dst = value converted to dst's dtype.
void fill(const View& dst, double value, StreamRef stream);
/// Moves nbytes between the host and a device, or between two devices, in
/// order on `stream` (the current stream of the CUDA side; the destination's
/// for two devices). Blocking unless non_blocking and the host side is
/// pinned; a blocking copy to the host synchronizes the stream and checks
/// the device's error flag (Note [Device error flag]).
void memcpy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes,
            bool non_blocking, StreamRef stream);

}  // namespace ember::kernels::cuda
