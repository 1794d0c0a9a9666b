// pool front functions.
#include "kernels/pool.h"
