// elementwise front functions.
#include "kernels/elementwise.h"
