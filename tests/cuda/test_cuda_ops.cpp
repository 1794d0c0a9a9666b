// CUDA against the CPU backend for every op-table entry with a CUDA kernel:
// each signature on the entry's CUDA cases (odd sizes for the vector tails, a
// 2-d case, broadcasting), in the entry's CUDA layouts (contiguous and
// transposed — the offset path — unless it says otherwise), every output.
// Elementwise ops run the functors of kernels/math.h on both backends, so
// results agree bit for bit except where the device math library differs
// (exp, log, tanh, erf, pow: a few ulp); cuBLAS and cuDNN sum in their own
// order. An entry that is not cuda_exact says its cuda_tolerance for each
// output, from the output's dtype and the call (its CPU inputs in the layout
// under test, and its Args): an f64 result of f32 logits or of an f32 x
// carries f32 precision, a statistic is held tighter than a value.
#include "core/cuda_context.h"
#include "ops/op_table.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const Device kGpu = Device::cuda(0);

void check_on_cuda(const OpEntry& e) {
    uint64_t seed = 0;
    for (const Signature& sig : e.dtypes)
        for (size_t ci = 0; ci < e.cuda_cases.size(); ++ci) {
            const Case& c = e.cuda_cases[ci];
            const std::vector<Tensor> host = make_inputs(e, c, sig, ++seed);
            std::vector<Tensor> dev;
            for (const Tensor& t : host) dev.push_back(t.to(kGpu));
            for (Layout layout : e.cuda_layouts) {
                const auto h = in_layout(host, layout), d = in_layout(dev, layout);
                if (!h) continue;
                const Sample s{describe_case(*h, c.args), *h, c.args, ci, layout};
                INFO(e.name << "(" << s.label << ")" << layout_name(layout));
                const Outputs want = e.raw(*h, c.args);
                const Outputs got = e.raw(*d, c.args);
                REQUIRE(got.size() == want.size());
                for (size_t i = 0; i < got.size(); ++i) {
                    INFO("output " << i);
                    REQUIRE(got[i].device() == kGpu);
                    REQUIRE(got[i].dtype() == want[i].dtype());
                    REQUIRE(got[i].shape() == want[i].shape());
                    const double tol = e.cuda_exact ? 0 : e.cuda_tolerance(want[i].dtype(), s, i);
                    check_close(got[i].to(Device::cpu()), want[i], tol, tol);
                }
            }
        }
}

}  // namespace

TEST_CASE("cuda: every op-table entry with a CUDA kernel equals the CPU's", "[cuda][ops]") {
    // Convolutions run on cuDNN, which a build may lack (tests/cuda/test_cuda_conv.cpp
    // checks the error that build gives).
    const bool cudnn = cuda_versions().find("cuDNN not built in") == std::string::npos;
    for (const OpEntry& e : op_table())
        if (e.cuda && (cudnn || e.family != Family::conv)) DYNAMIC_SECTION(e.name) {
                check_on_cuda(e);
            }
}
