// Factories: allocate, then fill through the copy front or one dispatched random fill.
#include "kernels/factories.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/copy.h"
#include "kernels/front.h"
#include "kernels/random.h"

namespace ember {

Tensor full(const Shape& shape, double value, TensorOptions o) {
    Tensor t = empty(shape, o);
    kernels::fill(t, value);
    return t;
}
Tensor zeros(const Shape& shape, TensorOptions o) { return full(shape, 0.0, o); }
Tensor ones(const Shape& shape, TensorOptions o) { return full(shape, 1.0, o); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), kernels::like(t)); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), kernels::like(t)); }
Tensor empty_like(const Tensor& t) { return empty(t.shape(), kernels::like(t)); }

namespace {
// Builds values on the host in f64 and converts into the requested dtype/device.
template <class F>
Tensor from_index_fn(int64_t n, TensorOptions o, F f) {
    Tensor host = empty({n}, {DType::f64, Device::cpu(), false});
    double* p = host.data<double>();
    for (int64_t i = 0; i < n; ++i) p[i] = f(i);
    Tensor out = empty({n}, o);
    kernels::copy(out, host);
    return out;
}
}  // namespace

Tensor arange(double start, double end, double step, TensorOptions o) {
    EMBER_CHECK(step != 0 && std::isfinite(step) && std::isfinite(start) && std::isfinite(end),
                "arange: need finite start, end and a nonzero step, got (", start, ", ", end, ", ",
                step, ")");
    const double count = std::ceil((end - start) / step);
    EMBER_CHECK(count < double(int64_t(1) << 48), "arange: (", start, ", ", end, ", ", step,
                ") gives too many elements");
    const int64_t n = count > 0 ? int64_t(count) : 0;
    return from_index_fn(n, o, [&](int64_t i) { return start + double(i) * step; });
}

Tensor arange(double end, TensorOptions o) { return arange(0.0, end, 1.0, o); }

Tensor linspace(double start, double end, int64_t steps, TensorOptions o) {
    EMBER_CHECK(steps >= 0, "linspace: steps must be non-negative, got ", steps);
    const double step = steps > 1 ? (end - start) / double(steps - 1) : 0.0;
    // Symmetric formula (as in PyTorch): both ends are exact.
    return from_index_fn(steps, o, [&](int64_t i) {
        if (steps == 1) return start;
        return i < steps / 2 ? start + step * double(i) : end - step * double(steps - 1 - i);
    });
}

namespace {
Generator& gen_or_default(Generator* g) { return g ? *g : default_generator(); }
}  // namespace

Tensor rand(const Shape& shape, TensorOptions o, Generator* g) {
    EMBER_CHECK(is_floating(o.dtype), "rand: dtype must be floating, got ", dtype_name(o.dtype));
    Tensor t = empty(shape, o);
    Generator& gen = gen_or_default(g);
    const GeneratorState r = gen.reserve(kernels::uniform_blocks(t.numel(), o.dtype));
    const uint64_t seed = r.seed, first = r.offset;
    const kernels::View v = kernels::view_of(t, "rand");
    kernels::dispatch({"rand", o.device, {&t}}, [&] { kernels::cpu::uniform(v, seed, first, 0.0, 1.0); },
                      [&](auto stream) { kernels::cuda::uniform(v, seed, first, 0.0, 1.0, stream); });
    return t;
}

Tensor randn(const Shape& shape, TensorOptions o, Generator* g) {
    EMBER_CHECK(is_floating(o.dtype), "randn: dtype must be floating, got ", dtype_name(o.dtype));
    Tensor t = empty(shape, o);
    Generator& gen = gen_or_default(g);
    const GeneratorState r = gen.reserve(kernels::normal_blocks(t.numel()));
    const uint64_t seed = r.seed, first = r.offset;
    const kernels::View v = kernels::view_of(t, "randn");
    kernels::dispatch({"randn", o.device, {&t}}, [&] { kernels::cpu::normal(v, seed, first, 0.0, 1.0); },
                      [&](auto stream) { kernels::cuda::normal(v, seed, first, 0.0, 1.0, stream); });
    return t;
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions o, Generator* g) {
    EMBER_CHECK(low < high, "randint: need low < high, got [", low, ", ", high, ")");
    EMBER_CHECK(o.dtype != DType::boolean, "randint: dtype bool is not supported");
    // Every value in [low, high) must be exact in the dtype.
    const double lo = double(low), hi = double(high) - 1;
    double min_ok, max_ok;
    switch (o.dtype) {
        case DType::u8: min_ok = 0, max_ok = 255; break;
        case DType::i32: min_ok = -2147483648.0, max_ok = 2147483647.0; break;
        case DType::f16: min_ok = -2048, max_ok = 2048; break;      // 2^11: f16 integers are exact
        case DType::bf16: min_ok = -256, max_ok = 256; break;       // 2^8
        case DType::f32: min_ok = -16777216.0, max_ok = 16777216.0; break;  // 2^24
        case DType::f64: min_ok = -9007199254740992.0, max_ok = 9007199254740992.0; break;
        default: min_ok = -9223372036854775808.0, max_ok = 9223372036854775807.0; break;
    }
    EMBER_CHECK(lo >= min_ok && hi <= max_ok, "randint: [", low, ", ", high,
                ") does not fit dtype ", dtype_name(o.dtype), " exactly");
    const uint64_t range = uint64_t(high) - uint64_t(low);
    Tensor t = empty(shape, o);
    Generator& gen = gen_or_default(g);
    const GeneratorState r = gen.reserve(kernels::randint_blocks(t.numel(), range));
    const uint64_t seed = r.seed, first = r.offset;
    const kernels::View v = kernels::view_of(t, "randint");
    kernels::dispatch({"randint", o.device, {&t}}, [&] { kernels::cpu::randint(v, seed, first, low, range); },
                      [&](auto stream) { kernels::cuda::randint(v, seed, first, low, range, stream); });
    return t;
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
    const Shape s = shape.empty() && values.size() != 1 ? Shape{int64_t(values.size())} : shape;
    EMBER_CHECK(shape_numel(s) == int64_t(values.size()), "from_vector: ", values.size(),
                " values do not fill shape ", shape_str(s));
    Tensor host = empty(s, {dtype_of<T>(), Device::cpu(), false});
    if (!values.empty()) std::memcpy(host.data_ptr(), values.data(), values.size() * sizeof(T));
    return host.to(device);
}

template Tensor from_vector<float>(const std::vector<float>&, const Shape&, Device);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, Device);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&, Device);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, Device);
template Tensor from_vector<uint8_t>(const std::vector<uint8_t>&, const Shape&, Device);
template Tensor from_vector<Half>(const std::vector<Half>&, const Shape&, Device);
template Tensor from_vector<BFloat16>(const std::vector<BFloat16>&, const Shape&, Device);

namespace kernels {
uint64_t uniform_blocks(int64_t n, DType dtype) {
    const uint64_t per = dtype == DType::f64 ? 2 : 4;
    return (uint64_t(n) + per - 1) / per;
}
uint64_t normal_blocks(int64_t n) { return (uint64_t(n) + 1) / 2; }
uint64_t randint_blocks(int64_t n, uint64_t range) {
    const uint64_t per = range <= (uint64_t(1) << 32) ? 4 : 2;
    return (uint64_t(n) + per - 1) / per;
}
}  // namespace kernels

}  // namespace ember
