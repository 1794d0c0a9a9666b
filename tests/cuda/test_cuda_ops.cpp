// CUDA against the CPU backend for every op-table entry with a CUDA kernel:
// each signature on the entry's CUDA cases (odd sizes for the vector tails, a
// 2-d case, broadcasting), contiguous and transposed (the offset path). Both
// backends run the functors of kernels/math.h, so results agree bit for bit
// except where the device math library differs (exp, log, tanh, erf, pow: a
// few ulp), which the entry marks with cuda_exact = false.
#include "ops/op_table.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const Device kGpu = Device::cuda(0);

double library_tol(DType t) {
    return t == DType::f64 ? 1e-13 : t == DType::f32 ? 4e-6 : rtol_for(t);
}

void check_on_cuda(const OpEntry& e) {
    uint64_t seed = 0;
    for (const Signature& sig : e.dtypes)
        for (const Case& c : e.cuda_cases) {
            const std::vector<Tensor> host = make_inputs(e, c, sig, ++seed);
            std::vector<Tensor> dev;
            for (const Tensor& t : host) dev.push_back(t.to(kGpu));
            for (Layout layout : {Layout::contiguous, Layout::transposed}) {
                const auto h = in_layout(host, layout), d = in_layout(dev, layout);
                if (!h) continue;
                INFO(e.name << "(" << describe_case(*h, c.args) << ")"
                            << (layout == Layout::transposed ? " transposed" : ""));
                const Tensor want = e.raw(*h, c.args);
                const Tensor got = e.raw(*d, c.args);
                REQUIRE(got.device() == kGpu);
                REQUIRE(got.dtype() == want.dtype());
                REQUIRE(got.shape() == want.shape());
                const double tol = e.cuda_exact ? 0 : library_tol(want.dtype());
                check_close(got.to(Device::cpu()), want, tol, tol);
            }
        }
}

}  // namespace

TEST_CASE("cuda: every op-table entry with a CUDA kernel equals the CPU's", "[cuda][ops]") {
    for (const OpEntry& e : op_table())
        if (e.cuda) DYNAMIC_SECTION(e.name) {
                check_on_cuda(e);
            }
}
