// CPU reduce kernels.
#include "kernels/reduce.h"
