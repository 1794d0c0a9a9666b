// Tests for the matmul kernels.
#include "support.h"
