// CUDA copy/cast/fill kernels on Views, and memory moves between devices.
#pragma once

#include <cstddef>

#include "core/device.h"
#include "kernels/view.h"

namespace ember::kernels::cuda {

/// dst = cast(src) on one device; both views have the same shape.
void copy(const View& dst, const View& src, int device);
/// dst = value converted to dst's dtype.
void fill(const View& dst, double value, int device);
/// Moves nbytes between any two devices. Blocking unless non_blocking and the
/// host side is pinned (then ordered on the device's default stream).
void memcpy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes,
            bool non_blocking);

}  // namespace ember::kernels::cuda
