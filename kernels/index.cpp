// index front functions.
#include "kernels/index.h"
