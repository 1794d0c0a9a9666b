// shape_ops front functions.
#include "kernels/shape_ops.h"
