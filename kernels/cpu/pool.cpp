// CPU pool kernels.
#include "kernels/pool.h"
