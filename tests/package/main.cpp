// Built against the installed package by the package_consumer test: the README's
// C++ example (CPU part), checked, so the README cannot drift from the API.
#include <ember/ember.h>
#include <ember/kernels.h>  // installed too; its raw fronts must not make calls ambiguous
#include <ember/train.h>    // the training loop as a library, installed as well

#include <cstdio>
#include <vector>

int main() {
    // ---- README "Using ember from C++" ----
    using namespace ember;

    manual_seed(0);
    Tensor x = randn({64, 784});                        // f32 on the CPU
    Tensor labels = randint(0, 10, {64});                // i64
    auto model = nn::mlp();                             // 784-512-256-10, ReLU
    optim::AdamW opt(model->parameters(), {.lr = 1e-3});  // fused AdamW, the default optimizer
    opt.zero_grad();                                    // gradients to none (docs/tips.md #10)
    Tensor loss = cross_entropy((*model)(x), labels);   // records the graph
    loss.backward();                                    // p.grad() for every parameter
    opt.step();                                         // one fused pass over all parameters
    Tensor v = x.t().contiguous();                      // views share storage; contiguous copies
    Tensor s = x.slice(1, 0, 784, 2).to(DType::bf16);   // every 2nd column, as bf16
    std::vector<float> host(16);
    Tensor b = from_blob(host.data(), {4, 4});          // zero-copy view of your memory
    // ---- end of the example ----

    // With both headers and `using namespace ember`, the differentiable op is
    // the one picked (GeluApprox lives in ember, so no lookup reaches kernels::).
    Tensor h = gelu(x, GeluApprox::tanh);
    const bool gelu_ok = h.shape() == x.shape() && !h.requires_grad();
    Tensor raw = kernels::gelu(x, GeluApprox::tanh);  // the raw front, by its explicit name

    double after = 0;
    {
        NoGradGuard no_grad;
        after = cross_entropy((*model)(x), labels).item();
    }
    const bool ok = after < loss.item() && model->parameters()[0].grad().defined() &&
                    opt.steps() == 1 &&
                    v.is_contiguous() && v.at({5, 3}) == x.at({3, 5}) &&
                    s.shape() == Shape{64, 392} && b.data_ptr() == host.data() && gelu_ok &&
                    raw.at({1, 2}) == h.at({1, 2});
    std::printf("README example: %s\n", ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
