// conv front functions.
#include "kernels/conv.h"
