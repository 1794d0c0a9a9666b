// matmul front functions.
#include "kernels/matmul.h"
