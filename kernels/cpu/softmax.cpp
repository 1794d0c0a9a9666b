// CPU softmax kernels.
#include "kernels/softmax.h"
