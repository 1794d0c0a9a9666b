// The raw kernel fronts (ember::kernels), for tests, benchmarks and code that
// needs a kernel without autograd. They record nothing: a result computed
// here has no gradient. Most code wants ember/ember.h's differentiable ops.
#pragma once

#include "kernels/attention.h"
#include "kernels/conv.h"
#include "kernels/copy.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/factories.h"
#include "kernels/index.h"
#include "kernels/loss.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/optim.h"
#include "kernels/pool.h"
#include "kernels/profile.h"
#include "kernels/reduce.h"
#include "kernels/shape_ops.h"
#include "kernels/softmax.h"
