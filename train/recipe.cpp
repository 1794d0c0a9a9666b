// The list of reference models: each recipe is one file in train/recipes/.
#include "train/recipe.h"

#include "core/error.h"
#include "train/recipes/recipes.h"

namespace ember::train {

const std::vector<Recipe>& recipes() {
    static const std::vector<Recipe> all = {mlp_recipe(), resnet8_recipe(), gpt_recipe()};
    return all;
}

const Recipe& recipe(const std::string& name) {
    for (const Recipe& r : recipes())
        if (r.name == name) return r;
    EMBER_FAIL("unknown model '", name, "' (known: ", joined(recipe_names()), ")");
}

std::vector<std::string> recipe_names() {
    std::vector<std::string> names;
    for (const Recipe& r : recipes()) names.push_back(r.name);
    return names;
}

}  // namespace ember::train
