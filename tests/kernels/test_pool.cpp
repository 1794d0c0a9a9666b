// Tests for the pool kernels.
#include "support.h"
