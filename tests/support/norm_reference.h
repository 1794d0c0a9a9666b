// What the normalization tests share (tests/kernels/test_norm*.cpp): naive
// f64 batch norm and layer norm written here (statistics, outputs and
// gradients), the fused cases' inputs and the dtype tolerances.
#pragma once

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/norm.h"
#include "support.h"

namespace ember::test {

inline const DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

// Per-group mean and biased variance in f64, groups given by group(i) for flat index i.
struct Stats {
    std::vector<double> mean, var;
    std::vector<int64_t> count;
};
template <class G>
inline Stats group_stats(const std::vector<double>& x, int64_t groups, G group) {
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
inline RefNorm ref_norm(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& g, int64_t groups,
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

inline int64_t trailing(const Shape& s, size_t from) {
    int64_t n = 1;
    for (size_t i = from; i < s.size(); ++i) n *= s[i];
    return n;
}

inline RefNorm ref_batch_norm(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& g,
                       double eps) {
    const int64_t C = x.size(1), S = trailing(x.shape(), 2);
    auto ch = [C, S](size_t i) { return int64_t(i) / S % C; };
    return ref_norm(x, w, b, g, C, C, eps, ch, ch);
}

inline RefNorm ref_layer_norm(const Tensor& x, size_t k, const Tensor& w, const Tensor& b, const Tensor& g,
                       double eps) {
    const int64_t M = trailing(x.shape(), x.shape().size() - k),
                  R = x.numel() / std::max<int64_t>(M, 1);
    return ref_norm(
        x, w, b, g, R, M, eps, [M](size_t i) { return int64_t(i) / M; },
        [M](size_t i) { return int64_t(i) % M; });
}

// Two gradients or statistics tensors checked to a dtype's tolerance, scaled by
// the largest magnitude expected (sums cancel).
inline void check_scaled(const Tensor& got, const std::vector<double>& want, double rtol) {
    double big = 0;
    for (double v : want) big = std::max(big, std::abs(v));
    check_close(got, want, rtol, rtol * std::max(big, 1.0));
}

// Input gradients: x − mean with the mean saved in f32 loses digits where a
// group's values nearly coincide (var near eps), as in PyTorch's f32 kernels.
inline double grad_rtol(DType dt) { return dt == DType::f64 ? 1e-11 : std::max(2 * rtol_for(dt), 1e-4); }

// Whether a and b hold the same bytes (−0 and +0 differ here, unlike in check_close).
inline bool same_bits(const Tensor& a, const Tensor& b) {
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
inline FusedCase fused_case(const Shape& shape, DType dt, bool affine, uint64_t& seed, double lo,
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

/// An affine op's three gradients (gr.input, gr.weight, gr.bias) against
/// central differences of out(x, w, b) against the upstream gradient r.
template <class Grads, class Out>
void check_affine_grads(const Grads& gr, const Tensor& x, const Tensor& w, const Tensor& b,
                        const Tensor& r, Out out) {
    check_close(gr.input, numeric_grad(x, r, [&](const Tensor& t) { return out(t, w, b); }),
                1e-6, 1e-8);
    check_close(gr.weight, numeric_grad(w, r, [&](const Tensor& t) { return out(x, t, b); }),
                1e-6, 1e-8);
    check_close(gr.bias, numeric_grad(b, r, [&](const Tensor& t) { return out(x, w, t); }),
                1e-6, 1e-8);
}

}  // namespace ember::test
