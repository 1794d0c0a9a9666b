// CPU elementwise kernels.
#include "kernels/elementwise.h"
