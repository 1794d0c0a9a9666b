// Tests for the softmax kernels.
#include "support.h"
