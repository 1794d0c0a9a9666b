// Optimizers, clipping, accumulation and loss scaling in one include.
#pragma once

#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/grad_scaler.h"
#include "optim/lamb.h"
#include "optim/optimizer.h"
#include "optim/sgd.h"
