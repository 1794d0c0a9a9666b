// CPU copy/cast/fill kernels on Views.
#pragma once

#include "../view.h"

namespace ember::kernels::cpu {

/// dst = cast(src); both views have the same shape (src may have stride-0 dims).
void copy(const View& dst, const View& src);
/// dst = value converted to dst's dtype.
void fill(const View& dst, double value);

}  // namespace ember::kernels::cpu
