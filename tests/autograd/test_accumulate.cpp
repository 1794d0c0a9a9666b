// Accumulation into a leaf's grad() (Note [Gradient accumulation] in
// autograd/accumulate.cpp): in place while nobody else can see the gradient,
// out of place when a handle, a view or a saved graph shares it, and into the
// leaf's slot once it has one. Expected values are worked out on the host.
#include <cmath>

#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

// L = Σ tanh(w) · x, so dL/dw = (1 − tanh²(w)) · x.
void run_pass(const Tensor& w, const Tensor& x) { sum(tanh(w) * x).backward(); }

std::vector<double> expected_grad(const Tensor& w, const std::vector<Tensor>& xs) {
    const std::vector<double> wv = values(w);
    std::vector<double> out(wv.size(), 0.0);
    for (const Tensor& x : xs) {
        const std::vector<double> xv = values(x);
        for (size_t i = 0; i < wv.size(); ++i) {
            const double t = std::tanh(wv[i]);
            out[i] += (1 - t * t) * xv[i];
        }
    }
    return out;
}

std::vector<double> plus(std::vector<double> a, const std::vector<double>& b) {
    for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
    return a;
}

}  // namespace

TEST_CASE("accumulate: a private gradient is added in place", "[autograd][accumulate]") {
    for (DType dt : {DType::f32, DType::f64}) {
        INFO(dtype_name(dt));
        Tensor w = random_tensor({4, 6}, dt, 11).set_requires_grad(true);
        const Tensor x1 = random_tensor({4, 6}, dt, 12), x2 = random_tensor({4, 6}, dt, 13),
                     x3 = random_tensor({4, 6}, dt, 14);
        run_pass(w, x1);
        const void* ptr = w.grad().data_ptr();
        const StorageImpl* storage = w.grad().storage().get();
        const uint64_t version = w.grad().storage()->version();
        run_pass(w, x2);
        run_pass(w, x3);
        REQUIRE(w.grad().data_ptr() == ptr);
        REQUIRE(w.grad().storage().get() == storage);
        REQUIRE(w.grad().strides() == contiguous_strides({4, 6}));
        REQUIRE(w.grad().storage()->version() == version + 2);  // each in-place add counts
        check_close(w.grad(), expected_grad(w, {x1, x2, x3}), rtol_for(dt), 1e-6);
    }
}

TEST_CASE("accumulate: a gradient the user holds is never changed", "[autograd][accumulate]") {
    Tensor w = random_tensor({3, 5}, DType::f64, 21).set_requires_grad(true);
    const Tensor x1 = random_tensor({3, 5}, DType::f64, 22),
                 x2 = random_tensor({3, 5}, DType::f64, 23),
                 x3 = random_tensor({3, 5}, DType::f64, 24);
    run_pass(w, x1);
    const std::vector<double> first = expected_grad(w, {x1});
    Tensor held = w.grad();
    run_pass(w, x2);
    check_close(held, first, 1e-12, 1e-12);  // unchanged: the sum went to a new tensor
    REQUIRE(w.grad().data_ptr() != held.data_ptr());
    check_close(w.grad(), expected_grad(w, {x1, x2}), 1e-12, 1e-12);

    // A view or a detach() shares the storage, which counts as held as well.
    held = Tensor();
    Tensor view = w.grad().view({15});
    const std::vector<double> before = values(view);
    run_pass(w, x3);
    check_close(view, before, 1e-12, 1e-12);
    check_close(w.grad(), expected_grad(w, {x1, x2, x3}), 1e-12, 1e-12);

    // Once nothing else refers to it, the gradient is added into in place again.
    view = Tensor();
    const void* ptr = w.grad().data_ptr();
    run_pass(w, x1);
    REQUIRE(w.grad().data_ptr() == ptr);
    check_close(w.grad(), expected_grad(w, {x1, x2, x3, x1}), 1e-12, 1e-12);
}

TEST_CASE("accumulate: a gradient saved by a graph is not changed under it",
          "[autograd][accumulate]") {
    Tensor w = random_tensor({4}, DType::f64, 31).set_requires_grad(true);
    Tensor v = random_tensor({4}, DType::f64, 32).set_requires_grad(true);
    const Tensor x1 = random_tensor({4}, DType::f64, 33), x2 = random_tensor({4}, DType::f64, 34);
    run_pass(w, x1);
    const std::vector<double> g1 = values(w.grad());
    Tensor y = sum(w.grad() * v);  // saves w.grad() for v's gradient
    run_pass(w, x2);               // must not write into the saved gradient
    y.backward();                  // an in-place add would make this a version error
    check_close(v.grad(), g1, 1e-12, 1e-12);
    check_close(w.grad(), expected_grad(w, {x1, x2}), 1e-12, 1e-12);
}

TEST_CASE("accumulate: layouts a private gradient may have", "[autograd][accumulate]") {
    const Tensor x = random_tensor({3, 4}, DType::f64, 41);
    SECTION("transposed: added in place, strides kept") {
        Tensor w = random_tensor({3, 4}, DType::f64, 42).set_requires_grad(true);
        Tensor base = random_tensor({4, 3}, DType::f64, 43);
        w.set_grad(base.t());
        const std::vector<double> start = values(base.t());
        base = Tensor();  // the transposed view is now the only holder of its storage
        const void* ptr = w.grad().data_ptr();
        run_pass(w, x);
        REQUIRE(w.grad().data_ptr() == ptr);
        REQUIRE(w.grad().strides() == Shape{1, 3});
        check_close(w.grad(), plus(start, expected_grad(w, {x})), 1e-12, 1e-12);
    }
    SECTION("broadcast (stride 0): added out of place, every element right") {
        Tensor w = random_tensor({3, 4}, DType::f64, 44).set_requires_grad(true);
        Tensor row = random_tensor({1, 4}, DType::f64, 45);
        w.set_grad(row.expand({3, 4}));
        const std::vector<double> start = values(row.expand({3, 4}));
        row = Tensor();
        run_pass(w, x);
        REQUIRE(w.grad().is_contiguous());
        check_close(w.grad(), plus(start, expected_grad(w, {x})), 1e-12, 1e-12);
    }
}

TEST_CASE("accumulate: a slot keeps the gradient in place", "[autograd][accumulate]") {
    Tensor w = random_tensor({2, 3}, DType::f32, 51).set_requires_grad(true);
    const Tensor x1 = random_tensor({2, 3}, DType::f32, 52),
                 x2 = random_tensor({2, 3}, DType::f32, 53);
    Tensor buffer = full({16}, 7.0);  // 7s show any write outside the slot
    Tensor slot = buffer.narrow(0, 8, 6).view({2, 3});
    autograd::set_grad_slot(w, slot);
    REQUIRE_FALSE(w.grad().defined());  // no gradient yet: none appears
    run_pass(w, x1);                    // the first gradient is copied into the slot
    REQUIRE(w.grad().data_ptr() == slot.data_ptr());
    REQUIRE(autograd::grad_in_slot(w));
    Tensor held = w.grad();  // a slot is updated in place even while held
    run_pass(w, x2);
    REQUIRE(w.grad().data_ptr() == slot.data_ptr());
    const std::vector<double> want = expected_grad(w, {x1, x2});
    check_close(held, want, 2e-5, 1e-6);
    check_close(slot, want, 2e-5, 1e-6);
    const std::vector<double> b = values(buffer);
    for (int i : {0, 1, 2, 3, 4, 5, 6, 7, 14, 15}) REQUIRE(b[size_t(i)] == 7.0);

    // Cleared, the next first gradient lands in the slot again.
    w.set_grad({});
    held = Tensor();
    run_pass(w, x2);
    REQUIRE(w.grad().data_ptr() == slot.data_ptr());
    check_close(w.grad(), expected_grad(w, {x2}), 2e-5, 1e-6);

    // A gradient set by hand leaves the slot; forgetting the slot keeps the values.
    w.set_grad(zeros({2, 3}));
    REQUIRE_FALSE(autograd::grad_in_slot(w));
    w.set_grad({});
    run_pass(w, x1);
    autograd::set_grad_slot(w, {});
    REQUIRE_FALSE(autograd::grad_slot(w).defined());
    check_close(w.grad(), expected_grad(w, {x1}), 2e-5, 1e-6);
}

TEST_CASE("accumulate: set_grad_slot copies an existing gradient in and checks the slot",
          "[autograd][accumulate]") {
    Tensor w = random_tensor({5}, DType::f32, 61).set_requires_grad(true);
    run_pass(w, random_tensor({5}, DType::f32, 62));
    const std::vector<double> g = values(w.grad());
    Tensor slot = empty({5});
    autograd::set_grad_slot(w, slot);
    REQUIRE(w.grad().data_ptr() == slot.data_ptr());
    check_close(w.grad(), g, 0, 0);
    REQUIRE_THROWS_WITH_MSG(autograd::set_grad_slot(w, empty({4})),
                            "set_grad_slot: the slot f32 [4] on cpu must be a dense tensor like "
                            "the leaf, f32 [5] on cpu");
    REQUIRE_THROWS_WITH_MSG(autograd::set_grad_slot(w, empty({1}).expand({5})),
                            "must be a dense tensor");
    REQUIRE_THROWS_WITH_MSG(autograd::set_grad_slot(random_tensor({5}, DType::f32, 63), slot),
                            "set_grad_slot: the leaf [5] does not require grad");
}
