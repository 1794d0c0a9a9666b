// softmax front functions.
#include "kernels/softmax.h"
