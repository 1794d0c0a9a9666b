// Optimizers, LR schedules and the LR finder, clipping, accumulation and loss
// scaling in one include.
#pragma once

#include "adam.h"
#include "clip.h"
#include "grad_scaler.h"
#include "lamb.h"
#include "lr_find.h"
#include "optimizer.h"
#include "schedule.h"
#include "sgd.h"
