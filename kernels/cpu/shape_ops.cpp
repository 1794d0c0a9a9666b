// CPU shape_ops kernels.
#include "kernels/shape_ops.h"
