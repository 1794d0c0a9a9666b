// batch_norm (training, eval, backward) and layer_norm (forward, backward)
// against naive f64 loops (tests/support/norm_reference.h), over shape tables
// (N = 1, C = 1, odd sizes, [N, C] and [N, C, H, W]; 1-d to 3-d normalized
// shapes), strided inputs, every floating dtype, with and without weight and
// bias; central differences of each forward; the running-statistics update;
// f32 accuracy on large channels; thread-count independence; channels-last
// inputs. The fused batch norm + ReLU ops: test_norm_fused.cpp; the errors:
// test_norm_errors.cpp.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>

#include "kernels/norm.h"
#include "support/norm_reference.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

TEST_CASE("batch_norm training forward and backward match f64 loops", "[norm][batch_norm]") {
    const Shape shapes[] = {{1, 3, 4, 5},  {2, 1, 3},  {5, 3},         {7, 5, 3, 3}, {4, 2, 1, 1},
                            {3, 6, 9, 13}, {2048, 40}, {8, 3, 64, 64}, {2, 4, 0}};
    uint64_t seed = 1;
    for (const Shape& shape : shapes) {
        for (DType dt : kFloats) {
            for (int affine = 0; affine < 2; ++affine) {
                const int64_t C = shape[1];
                const Tensor x = random_tensor(shape, dt, seed++, -3, 5);
                const Tensor g = random_tensor(shape, dt, seed++, -1, 1);
                // The parameters' dtype need not be x's.
                const Tensor w = affine ? random_tensor({C}, DType::f64, seed++, 0.5, 2) : Tensor();
                const Tensor b = affine ? random_tensor({C}, DType::f32, seed++, -1, 1) : Tensor();
                INFO(dtype_name(dt) << " " << shape_str(shape) << (affine ? " affine" : ""));
                if (x.numel() == 0) {
                    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_forward(x, w, b, {}, {}, 0.1, 1e-5),
                                            "expected more than 1 value per channel");
                    continue;
                }
                const RefNorm want = ref_batch_norm(x, w, b, g, 1e-5);
                const double rtol = rtol_for(dt);
                const auto f =
                    kernels::batch_norm_forward(non_contiguous(x), w, b, {}, {}, 0.1, 1e-5);
                REQUIRE(f.output.dtype() == dt);
                REQUIRE(f.output.shape() == shape);
                REQUIRE(f.save_mean.dtype() == (dt == DType::f64 ? DType::f64 : DType::f32));
                check_close(f.output, want.y, rtol, rtol);
                check_close(f.save_mean, want.st.mean, 1e-6, 1e-6);
                check_close(f.save_invstd, want.invstd, 1e-6, 0);
                const auto gr = kernels::batch_norm_backward(non_contiguous(g), x, w, f.save_mean,
                                                             f.save_invstd, {true, true, true});
                REQUIRE(gr.input.dtype() == dt);
                REQUIRE(gr.weight.dtype() == (affine ? DType::f64 : f.save_mean.dtype()));
                check_scaled(gr.input, want.gx, grad_rtol(dt));
                check_scaled(gr.weight, want.gw, std::max(rtol_for(gr.weight.dtype()), 1e-5));
                check_scaled(gr.bias, want.gb, std::max(rtol_for(gr.bias.dtype()), 1e-5));
            }
        }
    }
}

TEST_CASE("batch_norm updates running statistics with the unbiased variance",
          "[norm][batch_norm]") {
    for (DType rdt : {DType::f32, DType::f64, DType::bf16}) {
        INFO("running stats " << dtype_name(rdt));
        const Tensor x = random_tensor({4, 3, 5}, DType::f32, 20, -2, 6);
        const Tensor rm0 = random_tensor({3}, rdt, 21, -1, 1),
                     rv0 = random_tensor({3}, rdt, 22, 0.5, 2);
        // Strided running statistics are written in place through their strides.
        Tensor rm_buf = zeros({6}, {rdt}), rv_buf = zeros({6}, {rdt});
        Tensor rm = rm_buf.slice(0, 0, 6, 2), rv = rv_buf.slice(0, 0, 6, 2);
        rm.copy_(rm0);
        rv.copy_(rv0);
        kernels::batch_norm_forward(x, {}, {}, rm, rv, 0.25, 1e-5);
        const Stats s = group_stats(values(x), 3, [](size_t i) { return int64_t(i) / 5 % 3; });
        std::vector<double> want_m, want_v;
        for (size_t c = 0; c < 3; ++c) {
            want_m.push_back(0.75 * values(rm0)[c] + 0.25 * s.mean[c]);
            want_v.push_back(0.75 * values(rv0)[c] + 0.25 * s.var[c] * 20.0 / 19.0);
        }
        check_close(rm, want_m, rtol_for(rdt) + 1e-7, 1e-7);
        check_close(rv, want_v, rtol_for(rdt) + 1e-7, 1e-7);
        CHECK(rm_buf.at({1}) == 0);  // the gaps are untouched
        CHECK(rv_buf.at({3}) == 0);
    }
}

TEST_CASE("batch_norm_inference uses the running statistics", "[norm][batch_norm]") {
    uint64_t seed = 30;
    for (const Shape& shape : {Shape{3, 4}, Shape{2, 3, 5, 7}, Shape{1, 1, 9}}) {
        for (DType dt : kFloats) {
            INFO(dtype_name(dt) << " " << shape_str(shape));
            const int64_t C = shape[1], S = trailing(shape, 2);
            const Tensor x = random_tensor(shape, dt, seed++, -3, 3);
            const Tensor rm = random_tensor({C}, DType::f32, seed++, -1, 1);
            const Tensor rv = random_tensor({C}, DType::f32, seed++, 0.2, 3);
            const Tensor w = random_tensor({C}, dt, seed++, 0.5, 2);
            const Tensor b = random_tensor({C}, dt, seed++, -1, 1);
            const std::vector<double> xv = values(x), m = values(rm), v = values(rv),
                                      wv = values(w), bv = values(b);
            std::vector<double> want;
            for (size_t i = 0; i < xv.size(); ++i) {
                const size_t c = size_t(int64_t(i) / S % C);
                want.push_back((xv[i] - m[c]) / std::sqrt(v[c] + 1e-3) * wv[c] + bv[c]);
            }
            check_close(kernels::batch_norm_inference(non_contiguous(x), w, b, rm, rv, 1e-3), want,
                        rtol_for(dt), rtol_for(dt));
        }
    }
}

TEST_CASE("layer_norm forward and backward match f64 loops", "[norm][layer_norm]") {
    const struct {
        Shape x, normalized;
    } cases[] = {{{4, 5}, {5}},       {{1, 7}, {7}},       {{3, 1}, {1}},
                 {{6}, {6}},          {{2, 3, 4}, {3, 4}}, {{2, 3, 4, 5}, {3, 4, 5}},
                 {{300, 129}, {129}}, {{5, 1000}, {1000}}, {{700, 3, 2}, {2}},
                 {{0, 5}, {5}}};
    uint64_t seed = 100;
    for (const auto& c : cases) {
        for (DType dt : kFloats) {
            for (int affine = 0; affine < 2; ++affine) {
                INFO(dtype_name(dt) << " " << shape_str(c.x) << " over " << shape_str(c.normalized)
                                    << (affine ? " affine" : ""));
                const Tensor x = random_tensor(c.x, dt, seed++, -2, 4);
                const Tensor g = random_tensor(c.x, dt, seed++, -1, 1);
                const Tensor w =
                    affine ? random_tensor(c.normalized, dt, seed++, 0.5, 2) : Tensor();
                const Tensor b =
                    affine ? random_tensor(c.normalized, DType::f64, seed++) : Tensor();
                const RefNorm want = ref_layer_norm(x, c.normalized.size(), w, b, g, 1e-5);
                const double rtol = rtol_for(dt);
                const auto f =
                    kernels::layer_norm_forward(non_contiguous(x), c.normalized, w, b, 1e-5);
                Shape stats = c.x;
                for (size_t i = c.x.size() - c.normalized.size(); i < c.x.size(); ++i) stats[i] = 1;
                REQUIRE(f.mean.shape() == stats);
                REQUIRE(f.rstd.dtype() == (dt == DType::f64 ? DType::f64 : DType::f32));
                check_close(f.output, want.y, rtol, rtol);
                check_close(f.mean, want.st.mean, 1e-6, 1e-6);
                check_close(f.rstd, want.invstd, 1e-6, 0);
                const auto gr = kernels::layer_norm_backward(non_contiguous(g), x, c.normalized, w,
                                                             f.mean, f.rstd, {true, true, true});
                REQUIRE(gr.weight.shape() == c.normalized);
                check_scaled(gr.input, want.gx, grad_rtol(dt));
                check_scaled(gr.weight, want.gw, std::max(rtol_for(gr.weight.dtype()), 1e-5));
                check_scaled(gr.bias, want.gb, std::max(rtol_for(gr.bias.dtype()), 1e-5));
            }
        }
    }
    // An empty normalized row: NaN statistics, an empty output.
    const auto e = kernels::layer_norm_forward(ones({3, 0}), {0}, {}, {}, 1e-5);
    REQUIRE(e.mean.shape() == Shape{3, 1});
    CHECK(std::isnan(e.mean.at({2, 0})));
    CHECK(std::isnan(e.rstd.at({0, 0})));
}


TEST_CASE("norm backwards agree with central differences of the forwards", "[norm]") {
    const DType f64 = DType::f64;
    for (const Shape& shape : {Shape{3, 2, 2}, Shape{4, 3}, Shape{2, 3, 2, 1}}) {
        INFO("batch_norm " << shape_str(shape));
        const int64_t C = shape[1];
        const Tensor x = random_tensor(shape, f64, 200, -2, 2), r = random_tensor(shape, f64, 201);
        const Tensor w = random_tensor({C}, f64, 202, 0.5, 2), b = random_tensor({C}, f64, 203);
        const auto f = kernels::batch_norm_forward(x, w, b, {}, {}, 0.1, 1e-3);
        const auto gr =
            kernels::batch_norm_backward(r, x, w, f.save_mean, f.save_invstd, {true, true, true});
        auto out = [&](const Tensor& xx, const Tensor& ww, const Tensor& bb) {
            return kernels::batch_norm_forward(xx, ww, bb, {}, {}, 0.1, 1e-3).output;
        };
        check_affine_grads(gr, x, w, b, r, out);
    }
    for (const auto& [shape, ns] :
         {std::pair<Shape, Shape>{{3, 4}, {4}}, {{2, 2, 3}, {2, 3}}, {{2, 2, 2, 2}, {2, 2, 2}}}) {
        INFO("layer_norm " << shape_str(shape) << " over " << shape_str(ns));
        const Tensor x = random_tensor(shape, f64, 210, -2, 2), r = random_tensor(shape, f64, 211);
        const Tensor w = random_tensor(ns, f64, 212, 0.5, 2), b = random_tensor(ns, f64, 213);
        const auto f = kernels::layer_norm_forward(x, ns, w, b, 1e-3);
        const auto gr =
            kernels::layer_norm_backward(r, x, ns, w, f.mean, f.rstd, {true, true, true});
        auto out = [&](const Tensor& xx, const Tensor& ww, const Tensor& bb) {
            return kernels::layer_norm_forward(xx, ns, ww, bb, 1e-3).output;
        };
        check_affine_grads(gr, x, w, b, r, out);
    }
}


TEST_CASE("norm backwards compute only the gradients asked for", "[norm]") {
    const Tensor x = random_tensor({4, 3, 2}, DType::f32, 220),
                 g = random_tensor({4, 3, 2}, DType::f32, 221);
    const auto f = kernels::batch_norm_forward(x, {}, {}, {}, {}, 0.1, 1e-5);
    const auto only_input =
        kernels::batch_norm_backward(g, x, {}, f.save_mean, f.save_invstd, {true, false, false});
    CHECK(only_input.input.defined());
    CHECK(!only_input.weight.defined());
    CHECK(!only_input.bias.defined());
    const auto params =
        kernels::batch_norm_backward(g, x, {}, f.save_mean, f.save_invstd, {false, true, true});
    CHECK(!params.input.defined());
    check_close(
        params.bias,
        kernels::batch_norm_backward(g, x, {}, f.save_mean, f.save_invstd, {true, true, true}).bias,
        0, 0);
    const auto lf = kernels::layer_norm_forward(x, {3, 2}, {}, {}, 1e-5);
    const auto lg =
        kernels::layer_norm_backward(g, x, {3, 2}, {}, lf.mean, lf.rstd, {false, false, true});
    CHECK(!lg.input.defined());
    CHECK(!lg.weight.defined());
    REQUIRE(lg.bias.shape() == Shape{3, 2});
}

TEST_CASE("batch_norm statistics stay accurate in f32 over large channels", "[norm][batch_norm]") {
    // 2^18 values per channel around 1000: an f32 running sum would be off in
    // the fourth digit; the f64 sums are exact to f32 rounding.
    Tensor x = random_tensor({16, 2, 128, 128}, DType::f32, 230, 999, 1001);
    const auto f = kernels::batch_norm_forward(x, {}, {}, {}, {}, 0.1, 1e-5);
    const Stats s = group_stats(values(x), 2, [](size_t i) { return int64_t(i) / 16384 % 2; });
    check_close(f.save_mean, s.mean, 1e-7, 0);
    check_close(f.save_invstd, {1 / std::sqrt(s.var[0] + 1e-5), 1 / std::sqrt(s.var[1] + 1e-5)},
                1e-6, 0);
}

TEST_CASE("norm kernels give the same bits for 1 and 2 threads", "[norm]") {
    struct Run {
        std::vector<float> y, gx, gw, gb;
        bool operator==(const Run&) const = default;
    };
    auto bn = [](const Shape& shape) {
        const Tensor x = random_tensor(shape, DType::f32, 240, -3, 3),
                     g = random_tensor(shape, DType::f32, 241);
        const Tensor w = random_tensor({shape[1]}, DType::f32, 242);
        const auto f = kernels::batch_norm_forward(x, w, {}, {}, {}, 0.1, 1e-5);
        const auto gr =
            kernels::batch_norm_backward(g, x, w, f.save_mean, f.save_invstd, {true, true, true});
        return Run{f.output.to_vector<float>(), gr.input.to_vector<float>(),
                   gr.weight.to_vector<float>(), gr.bias.to_vector<float>()};
    };
    auto ln = [](const Shape& shape) {
        const Tensor x = random_tensor(shape, DType::f32, 243, -3, 3),
                     g = random_tensor(shape, DType::f32, 244);
        const Tensor w = random_tensor({shape.back()}, DType::f32, 245);
        const auto f = kernels::layer_norm_forward(x, {shape.back()}, w, {}, 1e-5);
        const auto gr = kernels::layer_norm_backward(g, x, {shape.back()}, w, f.mean, f.rstd,
                                                     {true, true, true});
        return Run{f.output.to_vector<float>(), gr.input.to_vector<float>(),
                   gr.weight.to_vector<float>(), gr.bias.to_vector<float>()};
    };
    const int saved = omp_get_max_threads();
    // Few channels with long planes, many channels, and a layer norm over 1000 rows.
    const Shape bn_shapes[] = {{8, 3, 64, 64}, {4096, 64}, {4, 64, 16, 16}};
    for (const Shape& s : bn_shapes) {
        INFO("batch_norm " << shape_str(s));
        omp_set_num_threads(std::max(2, saved));
        const Run many = bn(s);
        omp_set_num_threads(1);
        const Run one = bn(s);
        CHECK(many == one);
    }
    omp_set_num_threads(std::max(2, saved));
    const Run many = ln({1000, 300});
    omp_set_num_threads(1);
    const Run one = ln({1000, 300});
    omp_set_num_threads(saved);
    CHECK(many == one);
}


TEST_CASE("batch_norm on channels-last inputs", "[norm][batch_norm][format]") {
    const Shape shapes[] = {{8, 16, 10, 10}, {3, 32, 7, 5}, {2, 64, 3, 3}, {2, 3, 4, 4}, {1, 6, 5, 5}};
    const int saved = omp_get_max_threads();
    uint64_t seed = 700;
    for (const Shape& shape : shapes)
        for (DType dt : kFloats) {
            INFO(shape_str(shape) << " " << dtype_name(dt));
            const double tol = dt == DType::f64 ? 1e-12 : dt == DType::f32 ? 1e-5 : 2e-2;
            const int64_t C = shape[1];
            const Tensor x = random_tensor(shape, dt, ++seed, -3, 3);
            const Tensor r = random_tensor(shape, dt, ++seed);
            const Tensor g = random_tensor(shape, dt, ++seed);
            const Tensor w = random_tensor({C}, dt, ++seed), b = random_tensor({C}, dt, ++seed);
            auto last = [](const Tensor& t) { return t.contiguous(MemoryFormat::channels_last); };
            struct Out {
                Tensor y, yr, ya, rm, gx, gw, gb, gxr;
            };
            auto run = [&](bool cl, int threads) {
                omp_set_num_threads(threads);
                auto in = [&](const Tensor& t) { return cl ? last(t) : t; };
                Tensor rm = zeros({C}, {dt}), rv = ones({C}, {dt});
                const auto f = kernels::batch_norm_forward(in(x), w, b, rm, rv, 0.1, 1e-5);
                const auto fr = kernels::batch_norm_relu_forward(in(x), w, b, {}, {}, 0.1, 1e-5);
                const auto fa =
                    kernels::batch_norm_add_relu_forward(in(x), in(r), w, b, {}, {}, 0.1, 1e-5);
                const auto gr = kernels::batch_norm_backward(in(g), in(x), w, f.save_mean,
                                                             f.save_invstd, {true, true, true});
                const auto grr = kernels::batch_norm_relu_backward(
                    in(g), fr.output, in(x), w, fr.save_mean, fr.save_invstd, {true, false, false});
                omp_set_num_threads(saved);
                return Out{f.output, fr.output, fa.output, rm,
                           gr.input, gr.weight, gr.bias,   grr.input};
            };
            const Out want = run(false, saved), got = run(true, 1);
            for (const Tensor* t : {&got.y, &got.yr, &got.ya, &got.gx, &got.gxr})
                REQUIRE(t->is_contiguous(MemoryFormat::channels_last));
            check_close(got.y, want.y, tol, tol);
            check_close(got.yr, want.yr, tol, tol);
            check_close(got.ya, want.ya, tol, tol);
            check_close(got.rm, want.rm, tol, tol);
            check_close(got.gx, want.gx, tol, tol);
            check_close(got.gw, want.gw, tol, 10 * tol);
            check_close(got.gb, want.gb, tol, 10 * tol);
            check_close(got.gxr, want.gxr, tol, tol);
            for (int threads : {2, 3}) {
                INFO(threads << " threads");
                const Out many = run(true, threads);
                for (auto [a, c] : {std::pair{&many.y, &got.y},
                                    {&many.ya, &got.ya},
                                    {&many.gx, &got.gx},
                                    {&many.gw, &got.gw},
                                    {&many.gxr, &got.gxr}})
                    REQUIRE(a->to_vector<double>() == c->to_vector<double>());
            }
        }
}

