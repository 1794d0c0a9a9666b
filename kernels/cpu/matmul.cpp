// CPU matmul kernels.
#include "kernels/matmul.h"
