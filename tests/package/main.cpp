// Built against the installed package by the package_consumer test: the README's
// C++ example (CPU part), checked, so the README cannot drift from the API.
#include <ember/ember.h>

#include <cstdio>
#include <vector>

int main() {
    // ---- README "Using ember from C++" ----
    using namespace ember;
    namespace k = ember::kernels;

    manual_seed(0);
    Tensor x = randn({64, 128});                        // f32 on the CPU
    Tensor w = rand({10, 128}, {.dtype = DType::f64});   // options: dtype, device, pinned
    Tensor y = k::linear(x, w.to(DType::f32));           // x wᵀ, reading w.t() in place
    Tensor p = k::softmax(y, -1);                        // over the last dim
    Tensor top = k::argmax(p, 1);                        // i64 [64]
    Tensor v = x.t().contiguous();                      // views share storage; contiguous copies
    Tensor s = x.slice(1, 0, 128, 2).to(DType::bf16);   // every 2nd column, as bf16
    std::vector<float> host(16);
    Tensor b = from_blob(host.data(), {4, 4});          // zero-copy view of your memory
    // ---- end of the example ----

    const bool ok = top.shape() == Shape{64} && top.dtype() == DType::i64 &&
                    v.is_contiguous() && v.at({5, 3}) == x.at({3, 5}) &&
                    s.shape() == Shape{64, 64} && b.data_ptr() == host.data() &&
                    k::sum(p, {1}).at({7}) > 0.999 && k::sum(p, {1}).at({7}) < 1.001;
    std::printf("README example: %s\n", ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
