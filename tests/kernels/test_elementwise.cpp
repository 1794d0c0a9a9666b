// Tests for the elementwise kernels.
#include "support.h"
