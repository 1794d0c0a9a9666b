// The op table's gradcheck: every differentiable entry on its gradcheck cases
// (f64), contiguous and transposed, first with every floating input requiring
// grad, then with each one alone held constant.
#include "ops/op_table.h"
#include "support/grad_support.h"

using namespace ember;
using namespace ember::test;

namespace {

void check_gradients(const OpEntry& e) {
    Signature sig = e.dtypes.front();  // floating inputs in f64; a bool condition stays bool
    for (DType& t : sig)
        if (is_floating(t)) t = DType::f64;
    uint64_t seed = 100;
    for (const Case& c : e.grad_cases) {
        ++seed;
        for (Layout layout : {Layout::contiguous, Layout::transposed}) {
            // Fresh inputs per layout: a view of a tensor that requires grad is no leaf.
            const std::optional<std::vector<Tensor>> in =
                in_layout(make_inputs(e, c, sig, seed), layout);
            if (!in) continue;
            std::vector<size_t> floating;
            for (size_t i = 0; i < in->size(); ++i)
                if (is_floating((*in)[i].dtype())) floating.push_back(i);
            // -1: all require grad; k: floating[k] is a constant.
            const int last = floating.size() > 1 ? int(floating.size()) : 0;
            for (int frozen = -1; frozen < last; ++frozen) {
                for (size_t k = 0; k < floating.size(); ++k)
                    (*in)[floating[k]].set_requires_grad(int(k) != frozen);
                INFO(e.name << "(" << describe_case(*in, c.args) << ")"
                            << (layout == Layout::transposed ? " transposed" : "")
                            << (frozen >= 0 ? ", input " : "")
                            << (frozen >= 0 ? std::to_string(floating[size_t(frozen)]) : "")
                            << (frozen >= 0 ? " constant" : ""));
                check_grad(
                    [&](const std::vector<Tensor>& x) { return e.differentiable(x, c.args); }, *in);
            }
        }
    }
}

}  // namespace

TEST_CASE("op table: gradients of the differentiable entries by gradcheck", "[ops][grad]") {
    for (const OpEntry& e : op_table())
        if (e.differentiable) DYNAMIC_SECTION(e.name) {
                check_gradients(e);
            }
}
