// Tests for the conv kernels.
#include "support.h"
