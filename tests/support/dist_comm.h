// The communicator test_dist runs on (tests/dist/main.cpp).
#pragma once

#include <memory>

#include "dist/communicator.h"

namespace ember::test {

dist::Communicator& world();

}  // namespace ember::test
