// The kernel-launch counter: the host functions that launch ember's own
// fused kernels (the optimizers' updates and gradient passes) count each
// launch per thread under the kernel's name, so a benchmark or a test can
// measure how many launches a step makes rather than compute it from a plan.
// Library calls (cuBLAS, cuDNN, NCCL) and the elementwise kernels are not
// counted; nothing is counted in a build without CUDA.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace ember {

/// Counts one launch of `kernel` on this thread.
void count_launch(const char* kernel);

/// This thread's launches since the last call, by kernel name, and resets them.
std::map<std::string, int64_t> kernel_launches();

/// The sum of this thread's counts, without resetting them.
int64_t kernel_launch_total();

}  // namespace ember
