// CPU index kernels.
#include "kernels/index.h"
