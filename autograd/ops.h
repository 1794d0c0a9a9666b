// All differentiable ops and the autograd API in one include.
#pragma once

#include "accumulate.h"
#include "checkpoint.h"
#include "autocast.h"
#include "grad_mode.h"
#include "gradcheck.h"
#include "graph.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/matmul.h"
#include "ops/nn_ops.h"
#include "ops/reduce.h"
