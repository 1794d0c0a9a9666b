// Tests for the shape_ops kernels.
#include "support.h"
