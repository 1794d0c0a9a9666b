// Initialization: draw in f32/f64 from the Philox generator, then copy into
// the parameter without recording (the tensor may already require grad).
#include "nn/init.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "kernels/factories.h"

namespace ember::nn::init {

namespace {

void assign(const Tensor& t, const Tensor& values) {
    NoGradGuard no_grad;
    Tensor(t).copy_(values);
}

double fan_of(const Tensor& t, FanMode mode) {
    auto [in, out] = fans(t);
    return double(mode == FanMode::fan_in ? in : out);
}

}  // namespace

double calculate_gain(Nonlinearity nl, double param) {
    switch (nl) {
        case Nonlinearity::linear:
        case Nonlinearity::sigmoid: return 1.0;
        case Nonlinearity::relu: return std::sqrt(2.0);
        case Nonlinearity::leaky_relu: return std::sqrt(2.0 / (1 + param * param));
        case Nonlinearity::tanh: return 5.0 / 3.0;
    }
    return 1.0;
}

std::pair<int64_t, int64_t> fans(const Tensor& w) {
    EMBER_CHECK(w.dim() >= 2, "init: fan in/out need a weight with at least 2 dims, got ",
                shape_str(w.shape()));
    int64_t receptive = 1;
    for (int64_t d = 2; d < w.dim(); ++d) receptive *= w.size(d);
    return {w.size(1) * receptive, w.size(0) * receptive};
}

void uniform_(const Tensor& t, double low, double high, Generator* gen) {
    const DType draw = t.dtype() == DType::f64 ? DType::f64 : DType::f32;
    const Tensor u = rand(t.shape(), {draw, t.device()}, gen);
    NoGradGuard no_grad;
    assign(t, add(mul(u, high - low), low));
}

void normal_(const Tensor& t, double mean, double std, Generator* gen) {
    const DType draw = t.dtype() == DType::f64 ? DType::f64 : DType::f32;
    const Tensor n = randn(t.shape(), {draw, t.device()}, gen);
    NoGradGuard no_grad;
    assign(t, add(mul(n, std), mean));
}

void constant_(const Tensor& t, double value) {
    NoGradGuard no_grad;
    Tensor(t).fill_(value);
}
void zeros_(const Tensor& t) { constant_(t, 0); }
void ones_(const Tensor& t) { constant_(t, 1); }

void kaiming_uniform_(const Tensor& t, double a, FanMode mode, Nonlinearity nl, Generator* gen) {
    const double bound = calculate_gain(nl, a) * std::sqrt(3.0 / fan_of(t, mode));
    uniform_(t, -bound, bound, gen);
}

void kaiming_normal_(const Tensor& t, double a, FanMode mode, Nonlinearity nl, Generator* gen) {
    normal_(t, 0, calculate_gain(nl, a) / std::sqrt(fan_of(t, mode)), gen);
}

void xavier_uniform_(const Tensor& t, double gain, Generator* gen) {
    auto [in, out] = fans(t);
    const double bound = gain * std::sqrt(6.0 / double(in + out));
    uniform_(t, -bound, bound, gen);
}

void xavier_normal_(const Tensor& t, double gain, Generator* gen) {
    auto [in, out] = fans(t);
    normal_(t, 0, gain * std::sqrt(2.0 / double(in + out)), gen);
}

}  // namespace ember::nn::init
