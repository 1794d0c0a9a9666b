// The public API of ember in one include.
#pragma once

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/host_cache.h"
#include "core/tensor.h"
#include "kernels/factories.h"
