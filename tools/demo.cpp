// `ember demo`: a short tour of the tensor API, printed as it runs.
#include <cstdio>
#include <iostream>

#include "ember/ember.h"
#include "ember/kernels.h"
#include "tools/commands.h"

namespace ember::cli {

int run_demo() {
    manual_seed(0);
    Tensor x = randn({2, 3});
    std::cout << "x = randn({2, 3}):        " << x << "\n";
    std::cout << "x.t():                    " << x.t() << "\n";
    std::cout << "x.t().contiguous() strides " << shape_str(x.t().contiguous().strides()) << "\n";
    Tensor r = arange(0, 12).reshape({3, 4});
    std::cout << "arange(0, 12).reshape:    " << r << "\n";
    std::cout << "r.slice(1, 0, 4, 2):      " << r.slice(1, 0, 4, 2) << "\n";
    std::cout << "r.to(bf16):               " << r.to(DType::bf16) << "\n";
    Tensor w = randn({4, 3});
    Tensor y = kernels::linear(x, w);
    std::cout << "y = linear(x, w [4, 3]):  " << y << "\n";
    std::cout << "softmax(y, -1):           " << kernels::softmax(y, -1) << "\n";
    std::cout << "argmax(y, 1):             " << kernels::argmax(y, 1) << "\n";
    std::cout << "sum(relu(y), {1}):        " << kernels::sum(kernels::relu(y), {1}) << "\n";
    try {
        (void)kernels::add(x, w);
    } catch (const Error& e) {
        std::cout << "add(x, w) is an error:    " << e.what() << "\n";
    }
    if (cuda_device_count() > 0) {
        Tensor g = x.to(Device::cuda(0));
        std::cout << "relu(x) on cuda:0:        " << kernels::relu(g).to(Device::cpu()) << "\n";
    } else {
        std::cout << "(no CUDA device: the CUDA part of the tour is skipped)\n";
    }
    return 0;
}

}  // namespace ember::cli
