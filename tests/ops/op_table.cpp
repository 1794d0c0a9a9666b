// The op table's plumbing: the list of entries (from ops/entries_*.cpp),
// seeded inputs in each op's domain, the layouts every case runs in, labels
// and the bytes a call moves.
#include "ops/op_table.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "kernels/factories.h"
#include "ops/oracle.h"

namespace ember::test {

// Defined in ops/entries_<family>.cpp.
std::vector<OpEntry> elementwise_entries();
std::vector<OpEntry> reduce_entries();
std::vector<OpEntry> norm_entries();
std::vector<OpEntry> conv_entries();
std::vector<OpEntry> pool_entries();
std::vector<OpEntry> matmul_entries();
std::vector<OpEntry> loss_entries();
std::vector<OpEntry> index_entries();

const char* family_name(Family f) {
    switch (f) {
        case Family::unary:
            return "unary";
        case Family::binary:
            return "binary";
        case Family::compare:
            return "compare";
        case Family::where:
            return "where";
        case Family::clamp:
            return "clamp";
        case Family::activation_backward:
            return "activation_backward";
        case Family::reduce:
            return "reduce";
        case Family::softmax:
            return "softmax";
        case Family::norm:
            return "norm";
        case Family::conv:
            return "conv";
        case Family::pool:
            return "pool";
        case Family::matmul:
            return "matmul";
        case Family::loss:
            return "loss";
        case Family::index:
            return "index";
    }
    return "?";
}

const std::vector<OpEntry>& op_table() {
    static const std::vector<OpEntry> table = [] {
        std::vector<OpEntry> all;
        for (auto family : {elementwise_entries, reduce_entries, norm_entries, conv_entries,
                            pool_entries, matmul_entries, loss_entries, index_entries})
            for (OpEntry& e : family()) all.push_back(std::move(e));
        return all;
    }();
    return table;
}

std::vector<const OpEntry*> entries(Family f) {
    std::vector<const OpEntry*> out;
    for (const OpEntry& e : op_table())
        if (e.family == f) out.push_back(&e);
    return out;
}

namespace {

// A splitmix64 stream: seeded values that depend on no ember kernel, and fast
// enough for the table's million-element cases.
struct HostRng {
    uint64_t state;
    double uniform() {  // [0, 1)
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return double((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
    }
};

}  // namespace

Tensor random_input(const Shape& shape, DType dtype, const Domain& d, uint64_t seed) {
    HostRng rng{seed};
    std::vector<double> v(size_t(shape_numel(shape)));
    double lo = d.lo, hi = d.hi;
    const bool integral = !is_floating(dtype) || d.ties;
    if (!is_floating(dtype)) lo = d.int_lo, hi = d.int_hi;
    if (dtype == DType::u8) lo = std::max(lo, 0.0), hi = std::min(hi, 256.0);
    if (dtype == DType::boolean) lo = 0, hi = 2;
    for (double& x : v) {
        x = lo + (hi - lo) * rng.uniform();
        if (integral) x = std::floor(x);
        if (d.random_sign && !integral && rng.uniform() < 0.5) x = -x;
    }
    return from_vector(v, shape).to(dtype);
}

namespace {

// Every other row of a buffer twice as tall, its gaps holding 7s.
Tensor strided_rows(const Tensor& t) {
    Shape big = t.shape();
    big[0] *= 2;
    Tensor b = full(big, 7.0, {t.dtype(), t.device()});
    Tensor v = b.slice(0, 0, big[0], 2);
    v.copy_(t);
    return v;
}

// The same values, dense, with the memory order of the dims reversed.
Tensor reversed_memory(const Tensor& t) {
    Shape rev;
    for (int64_t d = t.dim() - 1; d >= 0; --d) rev.push_back(d);
    return t.permute(rev).contiguous().permute(rev);
}

}  // namespace

const char* layout_name(Layout l) {
    switch (l) {
        case Layout::contiguous:
            return "";
        case Layout::transposed:
            return " transposed";
        case Layout::strided:
            return " step-2 rows";
        case Layout::reversed:
            return " reversed memory order";
        case Layout::channels_last:
            return " channels-last";
    }
    return "";
}

double device_library_tolerance(DType t) {
    return t == DType::f64 ? 1e-13 : t == DType::f32 ? 4e-6 : rtol_for(t);
}

std::vector<Tensor> make_inputs(const OpEntry& e, const Case& c, const Signature& sig,
                                uint64_t seed) {
    if (e.generate) return e.generate(c, sig, seed);
    EMBER_CHECK(c.shapes.size() <= sig.size() && !e.domains.empty(), "op table: ", e.name,
                " has a case with ", c.shapes.size(), " shapes for ", sig.size(), " dtypes");
    std::vector<Tensor> in;
    for (size_t i = 0; i < c.shapes.size(); ++i) {
        const Domain& d = e.domains[std::min(i, e.domains.size() - 1)];
        in.push_back(random_input(c.shapes[i], sig[i], d, seed * 31 + i));
    }
    return in;
}

std::optional<std::vector<Tensor>> in_layout(const std::vector<Tensor>& inputs, Layout layout) {
    if (layout == Layout::contiguous) return inputs;
    std::vector<Tensor> out;
    bool changed = false;
    for (const Tensor& t : inputs) {
        const bool applies = layout == Layout::reversed        ? t.dim() >= 3
                             : layout == Layout::channels_last ? t.dim() == 4
                                                               : t.dim() >= 1;
        changed |= applies;
        if (!applies)
            out.push_back(t);
        else if (layout == Layout::transposed)
            out.push_back(non_contiguous(t));
        else if (layout == Layout::strided)
            out.push_back(strided_rows(t));
        else if (layout == Layout::channels_last)
            out.push_back(t.contiguous(MemoryFormat::channels_last));
        else
            out.push_back(reversed_memory(t));
    }
    if (!changed) return std::nullopt;
    return out;
}

std::string describe_case(const std::vector<Tensor>& inputs, const Args& a) {
    std::ostringstream os;
    for (size_t i = 0; i < inputs.size(); ++i)
        os << (i ? ", " : "") << dtype_name(inputs[i].dtype()) << " "
           << shape_str(inputs[i].shape());
    if (a.scalar) os << ", s = " << *a.scalar;
    if (!a.dims.empty()) os << ", dims " << shape_str(a.dims);
    if (a.keepdim) os << ", keepdim";
    if (a.p != 2) os << ", p = " << a.p;
    if (a.correction != 1) os << ", correction " << a.correction;
    if (a.lo) os << ", lo " << *a.lo;
    if (a.hi) os << ", hi " << *a.hi;
    const Args d;  // the defaults go unsaid
    const auto two = [&](const char* name, Int2 v, Int2 def) {
        if (v != def) os << ", " << name << " " << v[0] << "x" << v[1];
    };
    two("window", a.window, d.window);
    two("stride", a.stride, d.stride);
    two("padding", a.padding, d.padding);
    two("dilation", a.dilation, d.dilation);
    if (a.groups != d.groups) os << ", groups " << a.groups;
    if (a.ceil_mode) os << ", ceil_mode";
    if (!a.count_include_pad) os << ", count_include_pad off";
    if (a.eps != d.eps) os << ", eps " << a.eps;
    if (a.momentum != d.momentum) os << ", momentum " << a.momentum;
    if (!a.affine) os << ", no weight and bias";
    if (!a.running) os << ", no running statistics";
    if (a.label_smoothing != d.label_smoothing) os << ", label_smoothing " << a.label_smoothing;
    if (a.ignore_index != d.ignore_index) os << ", ignore_index " << a.ignore_index;
    if (a.need != d.need)
        os << ", need " << (a.need[0] ? "input " : "") << (a.need[1] ? "weight " : "")
           << (a.need[2] ? "bias" : "");
    const Draw& w = a.draw;
    if (w.ties) os << ", ties";
    if (w.any_index) os << ", any index";
    if (w.expanded_index) os << ", expanded index";
    if (w.range) os << ", values in ±" << *w.range;
    if (w.bad) os << ", bad value " << *w.bad;
    return os.str();
}

std::vector<Sample> samples(const OpEntry& e, const Signature& sig, uint64_t seed) {
    std::vector<Sample> out;
    for (size_t i = 0; i < e.cases.size(); ++i) {
        const Case& c = e.cases[i];
        const std::vector<Tensor> inputs = make_inputs(e, c, sig, ++seed);
        for (Layout l : e.layouts) {
            if (l != Layout::contiguous && c.args.keepdim) continue;
            std::optional<std::vector<Tensor>> in = in_layout(inputs, l);
            if (!in) continue;
            out.push_back(
                {describe_case(*in, c.args) + layout_name(l), std::move(*in), c.args, i, l});
        }
    }
    return out;
}

double bytes_moved(const Sample& s, const Outputs& out) {
    double b = 0;
    for (const Tensor& t : out) b += double(t.numel() * t.element_size());
    for (const Tensor& t : s.inputs)
        if (t.defined()) b += double(t.numel() * t.element_size());
    return b;
}

std::vector<double> rounded(const ExpectedOutput& e) {
    if (!is_floating(e.dtype) || e.dtype == DType::f64) return e.values;
    return values(from_vector(e.values, {int64_t(e.values.size())}).to(e.dtype));
}

}  // namespace ember::test
