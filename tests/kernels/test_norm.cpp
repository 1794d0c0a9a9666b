// batch_norm (training, eval, backward) and layer_norm (forward, backward)
// against naive f64 loops written here, over shape tables (N = 1, C = 1, odd
// sizes, [N, C] and [N, C, H, W]; 1-d to 3-d normalized shapes), strided
// inputs, every floating dtype, with and without weight and bias; central
// differences of each forward; the running-statistics update; f32 accuracy on
// large channels; thread-count independence; every error path.
#include <omp.h>

#include <cmath>
#include <cstring>

#include "kernels/norm.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

// Per-group mean and biased variance in f64, groups given by group(i) for flat index i.
struct Stats {
    std::vector<double> mean, var;
    std::vector<int64_t> count;
};
template <class G>
Stats group_stats(const std::vector<double>& x, int64_t groups, G group) {
    Stats s{std::vector<double>(size_t(groups)), std::vector<double>(size_t(groups)),
            std::vector<int64_t>(size_t(groups))};
    for (size_t i = 0; i < x.size(); ++i)
        s.mean[size_t(group(i))] += x[i], ++s.count[size_t(group(i))];
    for (int64_t c = 0; c < groups; ++c) s.mean[size_t(c)] /= double(s.count[size_t(c)]);
    for (size_t i = 0; i < x.size(); ++i) {
        const double d = x[i] - s.mean[size_t(group(i))];
        s.var[size_t(group(i))] += d * d;
    }
    for (int64_t c = 0; c < groups; ++c) s.var[size_t(c)] /= double(s.count[size_t(c)]);
    return s;
}

// Normalization output and gradients in f64: group(i) picks the statistics,
// param(i) the weight/bias element. Gradient: w·invstd·(g − mean g − x̂·mean(g·x̂)).
struct RefNorm {
    Stats st;
    std::vector<double> y, gx, gw, gb, invstd;
};
template <class G, class P>
RefNorm ref_norm(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& g, int64_t groups,
                 int64_t params, double eps, G group, P param) {
    const std::vector<double> xv = values(x), gv = values(g);
    const std::vector<double> wv = w.defined() ? values(w) : std::vector<double>(size_t(params), 1);
    const std::vector<double> bv = b.defined() ? values(b) : std::vector<double>(size_t(params), 0);
    RefNorm r;
    r.st = group_stats(xv, groups, group);
    for (int64_t c = 0; c < groups; ++c)
        r.invstd.push_back(1 / std::sqrt(r.st.var[size_t(c)] + eps));
    std::vector<double> sg(static_cast<size_t>(groups)), sgx(static_cast<size_t>(groups));
    r.gw.assign(size_t(params), 0);
    r.gb.assign(size_t(params), 0);
    for (size_t i = 0; i < xv.size(); ++i) {
        const size_t c = size_t(group(i)), p = size_t(param(i));
        const double xhat = (xv[i] - r.st.mean[c]) * r.invstd[c];
        r.y.push_back(xhat * wv[p] + bv[p]);
        sg[c] += gv[i] * wv[p];
        sgx[c] += gv[i] * wv[p] * xhat;
        r.gw[p] += gv[i] * xhat;
        r.gb[p] += gv[i];
    }
    for (size_t i = 0; i < xv.size(); ++i) {
        const size_t c = size_t(group(i)), p = size_t(param(i));
        const double n = double(r.st.count[c]), xhat = (xv[i] - r.st.mean[c]) * r.invstd[c];
        r.gx.push_back(r.invstd[c] * (gv[i] * wv[p] - sg[c] / n - xhat * sgx[c] / n));
    }
    return r;
}

int64_t trailing(const Shape& s, size_t from) {
    int64_t n = 1;
    for (size_t i = from; i < s.size(); ++i) n *= s[i];
    return n;
}

RefNorm ref_batch_norm(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& g,
                       double eps) {
    const int64_t C = x.size(1), S = trailing(x.shape(), 2);
    auto ch = [C, S](size_t i) { return int64_t(i) / S % C; };
    return ref_norm(x, w, b, g, C, C, eps, ch, ch);
}

RefNorm ref_layer_norm(const Tensor& x, size_t k, const Tensor& w, const Tensor& b, const Tensor& g,
                       double eps) {
    const int64_t M = trailing(x.shape(), x.shape().size() - k),
                  R = x.numel() / std::max<int64_t>(M, 1);
    return ref_norm(
        x, w, b, g, R, M, eps, [M](size_t i) { return int64_t(i) / M; },
        [M](size_t i) { return int64_t(i) % M; });
}

// Two gradients or statistics tensors checked to a dtype's tolerance, scaled by
// the largest magnitude expected (sums cancel).
void check_scaled(const Tensor& got, const std::vector<double>& want, double rtol) {
    double big = 0;
    for (double v : want) big = std::max(big, std::abs(v));
    check_close(got, want, rtol, rtol * std::max(big, 1.0));
}

// Input gradients: x − mean with the mean saved in f32 loses digits where a
// group's values nearly coincide (var near eps), as in PyTorch's f32 kernels.
double grad_rtol(DType dt) { return dt == DType::f64 ? 1e-11 : std::max(2 * rtol_for(dt), 1e-4); }

}  // namespace

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

namespace {

// d/dv of sum(f(v) · R) by central differences, in f64.
template <class F>
std::vector<double> numeric_grad(const Tensor& v, const Tensor& r, F f, double h = 1e-6) {
    const std::vector<double> rv = values(r);
    std::vector<double> out;
    Tensor vp = v.clone();
    for (int64_t i = 0; i < v.numel(); ++i) {
        const Shape at = unravel(i, v.shape());
        const double v0 = v.at(at);
        double side[2];
        for (int s = 0; s < 2; ++s) {
            vp.set(at, s == 0 ? v0 + h : v0 - h);
            const std::vector<double> y = values(f(vp));
            side[s] = 0;
            for (size_t j = 0; j < y.size(); ++j) side[s] += y[j] * rv[j];
        }
        vp.set(at, v0);
        out.push_back((side[0] - side[1]) / (2 * h));
    }
    return out;
}

}  // namespace

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
        check_close(gr.input, numeric_grad(x, r, [&](const Tensor& t) { return out(t, w, b); }),
                    1e-6, 1e-8);
        check_close(gr.weight, numeric_grad(w, r, [&](const Tensor& t) { return out(x, t, b); }),
                    1e-6, 1e-8);
        check_close(gr.bias, numeric_grad(b, r, [&](const Tensor& t) { return out(x, w, t); }),
                    1e-6, 1e-8);
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
        check_close(gr.input, numeric_grad(x, r, [&](const Tensor& t) { return out(t, w, b); }),
                    1e-6, 1e-8);
        check_close(gr.weight, numeric_grad(w, r, [&](const Tensor& t) { return out(x, t, b); }),
                    1e-6, 1e-8);
        check_close(gr.bias, numeric_grad(b, r, [&](const Tensor& t) { return out(x, w, t); }),
                    1e-6, 1e-8);
    }
}

namespace {

// Whether a and b hold the same bytes (−0 and +0 differ here, unlike in check_close).
bool same_bits(const Tensor& a, const Tensor& b) {
    if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
    const Tensor ac = a.contiguous(), bc = b.contiguous();
    return std::memcmp(ac.data_ptr(), bc.data_ptr(),
                       size_t(a.numel()) * size_t(dtype_size(a.dtype()))) == 0;
}

// Inputs of a fused batch norm case: x, a second tensor of x's shape (the
// upstream gradient or the residual) in [lo, hi], weight and bias when
// affine, and running statistics in two equal copies (the fused op's and the
// reference's). Draws its seeds from `seed`.
struct FusedCase {
    Tensor x, other, w, b, rm, rv, rm2, rv2;
};
FusedCase fused_case(const Shape& shape, DType dt, bool affine, uint64_t& seed, double lo,
                     double hi) {
    const int64_t C = shape[1];
    FusedCase f;
    f.x = random_tensor(shape, dt, seed++, -3, 5);
    f.other = random_tensor(shape, dt, seed++, lo, hi);
    f.w = affine ? random_tensor({C}, DType::f64, seed++, -2, 2) : Tensor();
    f.b = affine ? random_tensor({C}, DType::f32, seed++, -1, 1) : Tensor();
    f.rm = random_tensor({C}, DType::f32, seed, -1, 1);
    f.rv = random_tensor({C}, DType::f32, seed + 1, 0.5, 2);
    f.rm2 = f.rm.clone();
    f.rv2 = f.rv.clone();
    seed += 2;
    return f;
}

}  // namespace

// Note [Fused batch norm + ReLU] (kernels/norm.h): the fused op is the same
// kernel with the ReLU in the apply pass and the mask in the backward's sums
// and apply pass, so it must give relu(batch_norm(x)) and batch_norm's
// backward of relu_backward(g, y) exactly, bits and signed zeros included.
TEST_CASE("batch_norm_relu equals batch_norm then relu bit for bit", "[norm][batch_norm]") {
    const Shape shapes[] = {{2, 1, 3},  {5, 3},         {7, 5, 3, 3},   {3, 6, 9, 13},
                            {2048, 40}, {8, 3, 64, 64}, {4, 16, 28, 28}};
    uint64_t seed = 400;
    for (const Shape& shape : shapes)
        for (DType dt : kFloats)
            for (int affine = 0; affine < 2; ++affine) {
                INFO(dtype_name(dt) << " " << shape_str(shape) << (affine ? " affine" : ""));
                FusedCase c = fused_case(shape, dt, affine, seed, -1, 1);
                const Tensor &x = c.x, &g = c.other, &w = c.w, &b = c.b;
                Tensor &rm = c.rm, &rv = c.rv, &rm2 = c.rm2, &rv2 = c.rv2;
                const auto ref = kernels::batch_norm_forward(x, w, b, rm, rv, 0.1, 1e-5);
                const Tensor want_y = kernels::relu(ref.output);
                const auto f =
                    kernels::batch_norm_relu_forward(non_contiguous(x), w, b, rm2, rv2, 0.1, 1e-5);
                CHECK(same_bits(f.output, want_y));
                CHECK(same_bits(f.save_mean, ref.save_mean));
                CHECK(same_bits(f.save_invstd, ref.save_invstd));
                CHECK(same_bits(rm2, rm));
                CHECK(same_bits(rv2, rv));
                const std::array<bool, 3> all = {true, true, true};
                const auto want = kernels::batch_norm_backward(
                    kernels::relu_backward(g, want_y), x, w, ref.save_mean, ref.save_invstd, all);
                const auto got = kernels::batch_norm_relu_backward(
                    non_contiguous(g), f.output, x, w, f.save_mean, f.save_invstd, all);
                CHECK(same_bits(got.input, want.input));
                CHECK(same_bits(got.weight, want.weight));
                CHECK(same_bits(got.bias, want.bias));
                // Against f64: relu of the reference output, and the reference
                // gradient of grad_y masked where the op's output is 0.
                const std::vector<double> yv = values(f.output);
                std::vector<double> gm = values(g);
                for (size_t i = 0; i < gm.size(); ++i) gm[i] = yv[i] > 0 ? gm[i] : 0;
                const Tensor gmask = from_vector(gm, shape);
                RefNorm r = ref_batch_norm(x, w, b, gmask, 1e-5);
                for (double& v : r.y) v = std::max(v, 0.0);
                check_close(f.output, r.y, rtol_for(dt), rtol_for(dt));
                check_scaled(got.input, r.gx, grad_rtol(dt));
                check_scaled(got.weight, r.gw, std::max(rtol_for(got.weight.dtype()), 1e-5));
                check_scaled(got.bias, r.gb, std::max(rtol_for(got.bias.dtype()), 1e-5));
            }
}

// batch_norm_add_relu_forward (Note [Fused batch norm + ReLU]): batch norm's
// value rounded, the residual added and rounded, then the ReLU, as
// relu(add(batch_norm(x), r)) gives bit for bit.
TEST_CASE("batch_norm_add_relu equals batch_norm, add, relu bit for bit", "[norm][batch_norm]") {
    const Shape shapes[] = {{2, 1, 3}, {5, 3}, {7, 5, 3, 3}, {3, 6, 9, 13}, {4, 16, 28, 28}};
    uint64_t seed = 900;
    for (const Shape& shape : shapes)
        for (DType dt : kFloats)
            for (int affine = 0; affine < 2; ++affine) {
                INFO(dtype_name(dt) << " " << shape_str(shape) << (affine ? " affine" : ""));
                FusedCase c = fused_case(shape, dt, affine, seed, -2, 2);
                const Tensor &x = c.x, &r = c.other, &w = c.w, &b = c.b;
                Tensor &rm = c.rm, &rv = c.rv, &rm2 = c.rm2, &rv2 = c.rv2;
                const auto ref = kernels::batch_norm_forward(x, w, b, rm, rv, 0.1, 1e-5);
                const Tensor want = kernels::relu(kernels::add(ref.output, r));
                const auto f = kernels::batch_norm_add_relu_forward(
                    non_contiguous(x), non_contiguous(r), w, b, rm2, rv2, 0.1, 1e-5);
                CHECK(same_bits(f.output, want));
                CHECK(same_bits(f.save_mean, ref.save_mean));
                CHECK(same_bits(f.save_invstd, ref.save_invstd));
                CHECK(same_bits(rm2, rm));
                CHECK(same_bits(rv2, rv));
                // Against f64: max(y + r, 0) of the reference y.
                RefNorm rn = ref_batch_norm(x, w, b, r, 1e-5);
                const std::vector<double> rr = values(r);
                for (size_t i = 0; i < rn.y.size(); ++i) rn.y[i] = std::max(rn.y[i] + rr[i], 0.0);
                check_close(f.output, rn.y, 2 * rtol_for(dt), 2 * rtol_for(dt));
            }
}

TEST_CASE("batch_norm_add_relu errors name the op and the residual", "[norm][errors]") {
    const Tensor x = ones({4, 3, 2});
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_add_relu_forward(x, ones({4, 3}), {}, {}, {}, {}, 0.1, 1e-5),
        "batch_norm_add_relu_forward: residual f32 [4, 3] on cpu must have "
        "the shape and dtype of input f32 [4, 3, 2] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_add_relu_forward(x, ones({4, 3, 2}, {DType::f64}),
                                                                 {}, {}, {}, {}, 0.1, 1e-5),
                            "batch_norm_add_relu_forward: residual f64 [4, 3, 2]");
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_add_relu_forward(x, Tensor(), {}, {}, {}, {}, 0.1, 1e-5),
        "batch_norm_add_relu_forward: residual undefined must have the shape");
}

TEST_CASE("batch_norm_relu keeps relu's signed zeros and NaNs", "[norm][batch_norm]") {
    // A weight of 1e-9 makes every f16 output round to ±0: relu(−0) is −0
    // (−0 < 0 is false), and the fused op must write the same −0.
    const Tensor x = random_tensor({6, 2, 5}, DType::f16, 420, -3, 3);
    const Tensor w = full({2}, 1e-9);
    const Tensor want =
        kernels::relu(kernels::batch_norm_forward(x, w, {}, {}, {}, 0.1, 1e-5).output);
    const Tensor got = kernels::batch_norm_relu_forward(x, w, {}, {}, {}, 0.1, 1e-5).output;
    CHECK(same_bits(got, want));
    int64_t negative_zeros = 0;
    for (double v : values(got)) negative_zeros += v == 0 && std::signbit(v);
    CHECK(negative_zeros > 0);
    // A NaN input makes its channel NaN in both (relu(NaN) = NaN).
    Tensor xn = random_tensor({4, 2, 3}, DType::f32, 421);
    xn.set({1, 0, 2}, NAN);
    const auto fn = kernels::batch_norm_relu_forward(xn, {}, {}, {}, {}, 0.1, 1e-5);
    CHECK(same_bits(
        fn.output,
        kernels::relu(kernels::batch_norm_forward(xn, {}, {}, {}, {}, 0.1, 1e-5).output)));
    CHECK(std::isnan(fn.output.at({0, 0, 0})));
}

TEST_CASE("batch_norm_relu backward agrees with central differences", "[norm][batch_norm]") {
    const DType f64 = DType::f64;
    for (const Shape& shape : {Shape{3, 2, 2}, Shape{4, 3}, Shape{2, 3, 2, 1}}) {
        INFO(shape_str(shape));
        const int64_t C = shape[1];
        const Tensor x = random_tensor(shape, f64, 430, -2, 2), r = random_tensor(shape, f64, 431);
        const Tensor w = random_tensor({C}, f64, 432, 0.5, 2), b = random_tensor({C}, f64, 433);
        auto out = [&](const Tensor& xx, const Tensor& ww, const Tensor& bb) {
            return kernels::batch_norm_relu_forward(xx, ww, bb, {}, {}, 0.1, 1e-3).output;
        };
        const auto f = kernels::batch_norm_relu_forward(x, w, b, {}, {}, 0.1, 1e-3);
        int64_t zeros = 0;  // the ReLU must cut somewhere, or this tests batch norm alone
        for (double v : values(f.output)) zeros += v == 0;
        CHECK(zeros > 0);
        const auto gr = kernels::batch_norm_relu_backward(r, f.output, x, w, f.save_mean,
                                                          f.save_invstd, {true, true, true});
        check_close(gr.input, numeric_grad(x, r, [&](const Tensor& t) { return out(t, w, b); }),
                    1e-6, 1e-8);
        check_close(gr.weight, numeric_grad(w, r, [&](const Tensor& t) { return out(x, t, b); }),
                    1e-6, 1e-8);
        check_close(gr.bias, numeric_grad(b, r, [&](const Tensor& t) { return out(x, w, t); }),
                    1e-6, 1e-8);
    }
}

TEST_CASE("batch_norm_relu errors name the op and the tensors", "[norm][errors]") {
    const Tensor x = random_tensor({4, 3, 2}, DType::f32, 440);
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_relu_forward(ones({1, 3}), {}, {}, {}, {}, 0.1, 1e-5),
        "batch_norm_relu_forward: expected more than 1 value per channel");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_relu_forward(x, ones({4}), {}, {}, {}, 0.1, 1e-5),
                            "batch_norm_relu_forward: expected weight of shape [3]");
    const auto f = kernels::batch_norm_relu_forward(x, {}, {}, {}, {}, 0.1, 1e-5);
    const std::array<bool, 3> all = {true, true, true};
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_relu_backward(x, Tensor(), x, {}, f.save_mean, f.save_invstd, all),
        "batch_norm_relu_backward: output undefined (the forward's) must have the shape and "
        "dtype of input f32 [4, 3, 2] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_relu_backward(x, f.output.to(DType::f64), x, {}, f.save_mean,
                                          f.save_invstd, all),
        "batch_norm_relu_backward: output f64 [4, 3, 2] on cpu (the forward's)");
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_relu_backward(ones({4, 3}), f.output, x, {}, f.save_mean, f.save_invstd,
                                          all),
        "batch_norm_relu_backward: grad_y f32 [4, 3] on cpu must have the shape");
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

TEST_CASE("batch_norm errors name the op, the tensors and the problem", "[norm][errors]") {
    const Tensor x = random_tensor({4, 3, 2}, DType::f32, 300);
    const Tensor c3 = ones({3}), c4 = ones({4});
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_forward(Tensor(), {}, {}, {}, {}, 0.1, 1e-5),
                            "batch_norm_forward: undefined input");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_forward(ones({5}), {}, {}, {}, {}, 0.1, 1e-5),
                            "batch_norm_forward: expected input [N, C, *], got f32 [5] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_forward(x.to(DType::i32), {}, {}, {}, {}, 0.1, 1e-5),
        "batch_norm_forward: expected a floating-point tensor, got i32");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_forward(x, c4, {}, {}, {}, 0.1, 1e-5),
                            "batch_norm_forward: expected weight of shape [3] (floating) for input "
                            "f32 [4, 3, 2] on cpu, got f32 [4] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_forward(x, {}, c3.to(DType::i64), {}, {}, 0.1, 1e-5),
        "expected bias of shape [3] (floating) for input f32 [4, 3, 2] on cpu, got i64 [3]");
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_forward(x, {}, {}, c3, {}, 0.1, 1e-5),
        "batch_norm_forward: running_mean and running_var must be given together, "
        "got f32 [3] on cpu and undefined");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_forward(x, {}, {}, c3, ones({3, 1}), 0.1, 1e-5),
                            "expected running_var of shape [3] (floating)");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_forward(x, {}, {}, {}, {}, 0.1, 0),
                            "batch_norm_forward: eps must be > 0, got 0");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_forward(x, {}, {}, {}, {}, 0.1, -1e-5),
                            "eps must be > 0");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_forward(x, {}, {}, {}, {}, 1.5, 1e-5),
                            "batch_norm_forward: momentum must be in [0, 1], got 1.5");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_forward(ones({1, 3}), {}, {}, {}, {}, 0.1, 1e-5),
                            "batch_norm_forward: expected more than 1 value per channel when "
                            "training, got input f32 [1, 3] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_inference(x, {}, {}, {}, {}, 1e-5),
        "batch_norm_inference: eval mode needs running_mean and running_var, got "
        "undefined and undefined");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_inference(x, {}, {}, c3, c4, 1e-5),
                            "batch_norm_inference: expected running_var of shape [3]");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_inference(x, {}, {}, c3, c3, 0), "eps must be > 0");
    const auto f = kernels::batch_norm_forward(x, {}, {}, {}, {}, 0.1, 1e-5);
    const std::array<bool, 3> all = {true, true, true};
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_backward(ones({4, 3}), x, {}, f.save_mean, f.save_invstd, all),
        "batch_norm_backward: grad_y f32 [4, 3] on cpu must have the shape and "
        "dtype of input f32 [4, 3, 2] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_backward(x.to(DType::f64), x, {}, f.save_mean, f.save_invstd, all),
        "batch_norm_backward: grad_y f64 [4, 3, 2]");
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_backward(x, x, {}, f.save_mean.to(DType::f64), f.save_invstd, all),
        "batch_norm_backward: expected save_mean f32 [3] (the forward's) for input "
        "f32 [4, 3, 2] on cpu, got f64 [3] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_backward(x, x, {}, f.save_mean, Tensor(), all),
                            "expected save_invstd f32 [3] (the forward's) for input f32 [4, 3, 2] "
                            "on cpu, got undefined");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_backward(x, x, c4, f.save_mean, f.save_invstd, all),
                            "batch_norm_backward: expected weight of shape [3]");
}

TEST_CASE("layer_norm errors name the op, the tensors and the problem", "[norm][errors]") {
    const Tensor x = random_tensor({2, 3, 4}, DType::f32, 310);
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(Tensor(), {4}, {}, {}, 1e-5),
                            "layer_norm_forward: undefined input");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(x.to(DType::u8), {4}, {}, {}, 1e-5),
                            "layer_norm_forward: expected a floating-point tensor, got u8");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(x, {3}, {}, {}, 1e-5),
                            "layer_norm_forward: normalized_shape [3] must be non-empty and equal "
                            "the trailing dims of input f32 [2, 3, 4] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(x, {}, {}, {}, 1e-5),
                            "normalized_shape [] must be non-empty");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(x, {1, 2, 3, 4}, {}, {}, 1e-5),
                            "normalized_shape [1, 2, 3, 4] must be non-empty");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(x, {3, 4}, ones({12}), {}, 1e-5),
                            "layer_norm_forward: expected weight of shape [3, 4] (floating) for "
                            "input f32 [2, 3, 4] on cpu, got f32 [12] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(x, {4}, {}, ones({4}, {DType::i32}), 1e-5),
                            "expected bias of shape [4] (floating)");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(x, {4}, {}, {}, 0),
                            "layer_norm_forward: eps must be > 0, got 0");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(x, {4}, {}, {}, NAN), "eps must be > 0");
    const auto f = kernels::layer_norm_forward(x, {4}, {}, {}, 1e-5);
    const std::array<bool, 3> all = {true, true, true};
    REQUIRE_THROWS_WITH_MSG(
        kernels::layer_norm_backward(ones({2, 3}), x, {4}, {}, f.mean, f.rstd, all),
        "layer_norm_backward: grad_y f32 [2, 3] on cpu must have the shape and dtype");
    REQUIRE_THROWS_WITH_MSG(
        kernels::layer_norm_backward(x, x, {4}, {}, f.mean.view({2, 3}), f.rstd, all),
        "layer_norm_backward: expected mean f32 [2, 3, 1] (the forward's) for "
        "input f32 [2, 3, 4] on cpu, got f32 [2, 3] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::layer_norm_backward(x, x, {4}, {}, f.mean, f.rstd.to(DType::f64), all),
        "expected rstd f32 [2, 3, 1] (the forward's)");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_backward(x, x, {3, 4}, {}, f.mean, f.rstd, all),
                            "expected mean f32 [2, 1, 1]");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_backward(x, x, {2, 4}, {}, f.mean, f.rstd, all),
                            "layer_norm_backward: normalized_shape [2, 4] must be non-empty");
}

// Note [Channels-last batch norm] (kernels/cpu/norm.cpp): a channels-last
// input is normalized as it lies and its results keep the format; the values
// are the NCHW kernels' (tested above against f64 loops) up to the order of
// the channel sums, and bit-identical for any thread count.
TEST_CASE("batch_norm on channels-last inputs", "[norm][batch_norm][format]") {
    const Shape shapes[] = {{8, 16, 10, 10}, {3, 32, 7, 5}, {2, 3, 4, 4}, {1, 6, 5, 5}};
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
