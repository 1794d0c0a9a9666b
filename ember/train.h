// The training loop as a library, in one include (namespace ember::train):
// a task (model, data, loss, metric) and a configuration in, a run directory
// out — checkpoints with bit-exact resume, metrics.jsonl, progress, curves.
// docs/train.md, "Training a model of your own".
#pragma once

#include "ember.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/generate.h"
#include "train/recipe.h"
#include "train/run.h"
#include "train/task.h"
#include "train/trainer.h"
