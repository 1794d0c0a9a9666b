// libFuzzer's entry point for one target, chosen when it is compiled
// (-DEMBER_FUZZ_TARGET=safetensors, ...): tests/fuzz/CMakeLists.txt.
#include "support/fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    return ember::fuzz::EMBER_FUZZ_TARGET(data, size);
}
