// CPU conv kernels.
#include "kernels/conv.h"
