// The public API of ember in one include.
#pragma once

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/host_cache.h"
#include "core/tensor.h"
#include "kernels/conv.h"
#include "kernels/elementwise.h"
#include "kernels/factories.h"
#include "kernels/index.h"
#include "kernels/matmul.h"
#include "kernels/pool.h"
#include "kernels/reduce.h"
#include "kernels/shape_ops.h"
#include "kernels/softmax.h"
