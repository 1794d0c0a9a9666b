// Tests for the reduce kernels.
#include "support.h"
