// Parameter initialization schemes (in place, recorded by nothing): uniform,
// normal, constants, Kaiming (He) and Xavier (Glorot), with PyTorch's fans and gains.
#pragma once

#include <utility>

#include "../core/generator.h"
#include "../core/tensor.h"

namespace ember::nn::init {

enum class Nonlinearity { linear, relu, leaky_relu, tanh, sigmoid };
enum class FanMode { fan_in, fan_out };

/// The recommended gain for a nonlinearity (leaky_relu takes its negative slope).
double calculate_gain(Nonlinearity nl, double param = 0.01);
/// (fan_in, fan_out) of a weight: [out, in] for linear, [out, in, kh, kw] for conv.
std::pair<int64_t, int64_t> fans(const Tensor& weight);

// `gen` null: the default generator.
void uniform_(const Tensor& t, double low, double high, Generator* gen = nullptr);
void normal_(const Tensor& t, double mean, double std, Generator* gen = nullptr);
void constant_(const Tensor& t, double value);
void zeros_(const Tensor& t);
void ones_(const Tensor& t);
/// U(±gain·√(3/fan)), gain = calculate_gain(nl, a).
void kaiming_uniform_(const Tensor& t, double a = 0, FanMode mode = FanMode::fan_in,
                      Nonlinearity nl = Nonlinearity::leaky_relu, Generator* gen = nullptr);
/// N(0, gain/√fan).
void kaiming_normal_(const Tensor& t, double a = 0, FanMode mode = FanMode::fan_in,
                     Nonlinearity nl = Nonlinearity::leaky_relu, Generator* gen = nullptr);
/// U(±gain·√(6/(fan_in + fan_out))).
void xavier_uniform_(const Tensor& t, double gain = 1, Generator* gen = nullptr);
/// N(0, gain·√(2/(fan_in + fan_out))).
void xavier_normal_(const Tensor& t, double gain = 1, Generator* gen = nullptr);

}  // namespace ember::nn::init
