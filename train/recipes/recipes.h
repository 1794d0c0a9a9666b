// The reference models' recipes, one file each; train/recipe.cpp lists them.
#pragma once

#include "../recipe.h"

namespace ember::train {

Recipe mlp_recipe();      // train/recipes/mlp.cpp
Recipe resnet8_recipe();  // train/recipes/resnet8.cpp
Recipe gpt_recipe();      // train/recipes/gpt.cpp

}  // namespace ember::train
