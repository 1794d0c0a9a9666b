// Tests for the index kernels.
#include "support.h"
