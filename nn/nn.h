// The nn API in one include: Module, gradient arenas, layers, init, ConvBN,
// reference models, weight files.
#pragma once

#include "nn/conv_bn.h"
#include "nn/grad_arena.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/models.h"
#include "nn/transformer.h"
#include "nn/module.h"
#include "nn/safetensors.h"
#include "nn/serialize.h"
