// f64 references of the optimizers' documented update rules, written from the
// formulas (PyTorch's algorithms, You et al. for LAMB and LARS) with plain
// loops, and a harness that feeds an optimizer and its reference the same
// random gradients for several steps.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "support.h"

namespace ember::test::optim_ref {

/// One parameter tensor's reference state, flattened.
struct Ref {
    std::vector<double> p, m, v, vmax, buf;
    int64_t t = 0;
};

inline Ref ref_of(const Tensor& p) {
    Ref r;
    r.p = values(p);
    r.m.assign(r.p.size(), 0.0);
    r.v.assign(r.p.size(), 0.0);
    r.vmax.assign(r.p.size(), 0.0);
    r.buf.assign(r.p.size(), 0.0);
    return r;
}

inline void adam(Ref& r, const std::vector<double>& g, double lr, double b1, double b2, double eps,
                 double wd, bool decoupled, bool amsgrad = false) {
    ++r.t;
    const double bc1 = 1 - std::pow(b1, double(r.t)), bc2 = 1 - std::pow(b2, double(r.t));
    for (size_t i = 0; i < r.p.size(); ++i) {
        double gi = g[i];
        if (decoupled)
            r.p[i] *= 1 - lr * wd;
        else
            gi += wd * r.p[i];
        r.m[i] = b1 * r.m[i] + (1 - b1) * gi;
        r.v[i] = b2 * r.v[i] + (1 - b2) * gi * gi;
        r.vmax[i] = std::max(r.vmax[i], r.v[i]);
        const double second = amsgrad ? r.vmax[i] : r.v[i];
        r.p[i] -= lr / bc1 * r.m[i] / (std::sqrt(second) / std::sqrt(bc2) + eps);
    }
}

inline void sgd(Ref& r, const std::vector<double>& g, double lr, double mu, double damp, double wd,
                bool nesterov) {
    for (size_t i = 0; i < r.p.size(); ++i) {
        double d = g[i] + wd * r.p[i];
        if (mu != 0) {
            r.buf[i] = r.t == 0 ? d : mu * r.buf[i] + (1 - damp) * d;
            d = nesterov ? d + mu * r.buf[i] : r.buf[i];
        }
        r.p[i] -= lr * d;
    }
    ++r.t;
}

inline double norm(const std::vector<double>& x) {
    double s = 0;
    for (double v : x) s += v * v;
    return std::sqrt(s);
}

inline void lamb(Ref& r, const std::vector<double>& g, double lr, double b1, double b2, double eps,
                 double wd) {
    ++r.t;
    const double bc1 = 1 - std::pow(b1, double(r.t)), bc2 = 1 - std::pow(b2, double(r.t));
    std::vector<double> u(r.p.size());
    for (size_t i = 0; i < r.p.size(); ++i) {
        r.m[i] = b1 * r.m[i] + (1 - b1) * g[i];
        r.v[i] = b2 * r.v[i] + (1 - b2) * g[i] * g[i];
        u[i] = (r.m[i] / bc1) / (std::sqrt(r.v[i] / bc2) + eps) + wd * r.p[i];
    }
    const double pn = norm(r.p), un = norm(u);
    const double trust = pn > 0 && un > 0 ? std::min(pn, 10.0) / un : 1.0;
    for (size_t i = 0; i < r.p.size(); ++i) r.p[i] -= lr * trust * u[i];
}

inline void lars(Ref& r, const std::vector<double>& g, double lr, double mu, double wd, double eta,
                 double eps, bool exclude) {
    const double d_wd = exclude ? 0 : wd;
    const double pn = norm(r.p), gn = norm(g);
    const double local = exclude || pn == 0 || gn == 0 ? 1.0 : eta * pn / (gn + d_wd * pn + eps);
    for (size_t i = 0; i < r.p.size(); ++i) {
        r.buf[i] = mu * r.buf[i] + lr * local * (g[i] + d_wd * r.p[i]);
        r.p[i] -= r.buf[i];
    }
    ++r.t;
}

/// Parameters of three sizes (one past a chunk boundary, so a tensor spans
/// several chunks), seeded, of `dtype`, requiring grad.
inline std::vector<Tensor> make_params(DType dtype, uint64_t seed) {
    std::vector<Tensor> ps;
    const Shape shapes[] = {{7}, {5, 3}, {70001}};
    for (const Shape& s : shapes)
        ps.push_back(random_tensor(s, dtype, seed++, -1, 1).set_requires_grad(true));
    return ps;
}

/// Runs `steps` steps: gives every parameter a fresh random gradient (the
/// same values to the optimizer, through set_grad, and to `ref_step`), then
/// calls opt_step. Returns the references' final states.
inline std::vector<Ref> run(const std::vector<Tensor>& params, int steps,
                            const std::function<void()>& opt_step,
                            const std::function<void(Ref&, const std::vector<double>&)>& ref_step,
                            uint64_t seed = 100) {
    std::vector<Ref> refs;
    for (const Tensor& p : params) refs.push_back(ref_of(p));
    for (int s = 0; s < steps; ++s) {
        for (size_t i = 0; i < params.size(); ++i) {
            const Tensor g = random_tensor(params[i].shape(), params[i].dtype(), seed++, -1, 1);
            params[i].set_grad(g);
            ref_step(refs[i], values(g));
        }
        opt_step();
    }
    return refs;
}

}  // namespace ember::test::optim_ref
