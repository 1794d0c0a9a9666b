// Optimizers, LR schedules and the LR finder, clipping, accumulation and loss
// scaling in one include.
#pragma once

#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/grad_scaler.h"
#include "optim/lamb.h"
#include "optim/lr_find.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
