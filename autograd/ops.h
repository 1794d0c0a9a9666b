// All differentiable ops and the autograd API in one include.
#pragma once

#include "autograd/accumulate.h"
#include "autograd/checkpoint.h"
#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops/attention.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/index.h"
#include "autograd/ops/matmul.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
