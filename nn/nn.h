// The nn API in one include: Module, gradient arenas, layers, init, ConvBN,
// reference models, weight files.
#pragma once

#include "conv_bn.h"
#include "grad_arena.h"
#include "init.h"
#include "layers.h"
#include "models.h"
#include "transformer.h"
#include "module.h"
#include "safetensors.h"
#include "serialize.h"
