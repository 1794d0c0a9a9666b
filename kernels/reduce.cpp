// reduce front functions.
#include "kernels/reduce.h"
