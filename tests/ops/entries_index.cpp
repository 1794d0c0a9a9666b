// The index entries of the op table: index_select, gather, scatter_add and
// index_add (out of place and in place) and embedding, every dtype with i64
// and i32 indices drawn in range with repeats. Both backends add each line
// along dim in the same order (kernels/index_lines.h, Note [Sorted
// scatter_add]), so tests/cuda/test_cuda_ops.cpp compares CUDA bit for bit on
// the cuda_cases: the shapes tests/cuda/test_cuda_index.cpp used to compare,
// the sorted scatter_add path included.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <tuple>

#include "autograd/ops/index.h"
#include "core/error.h"
#include "kernels/cuda/index_plan.h"
#include "kernels/index.h"
#include "ops/op_table.h"
#include "ops/reference.h"

namespace ember::test {

namespace {

// What an entry's Args mean here:
//   dims[0]  the dim (embedding has none: it picks rows of dim 0);
//   draw.range           floats uniform in [-range, range): sums whose
//                        rounding shows the order of the adds. Unset: odd
//                        multiples of 1/4 in (-2, 2), whose sums stay exact in
//                        every float dtype (see scatter_tolerance);
//   draw.expanded_index  the index read with stride 0 along its dim 0 (its
//                        first row expanded), the layout of a broadcast index.
enum class Kind { select, gather, scatter, index_add, embedding };

const std::vector<DType> kAll = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                 DType::i32, DType::i64, DType::u8,  DType::boolean};

// Every data dtype with each index dtype: (data, index) or (data, index, data).
std::vector<Signature> signatures(size_t inputs) {
    std::vector<Signature> out;
    for (DType t : kAll)
        for (DType i : {DType::i64, DType::i32})
            out.push_back(inputs == 2 ? Signature{t, i} : Signature{t, i, t});
    return out;
}

int64_t dim_of(const Args& a, size_t rank) {
    const int64_t d = a.dims.empty() ? 0 : a.dims[0];
    return d < 0 ? d + int64_t(rank) : d;
}

// The index as the front gets it (see draw.expanded_index above).
Tensor as_called(const Tensor& index, const Args& a) {
    if (!a.draw.expanded_index || index.dim() == 0) return index;
    return index.narrow(0, 0, 1).expand(index.shape());
}

// A data input. Integers: i32 across most of its range and u8 across all of
// it, so sums wrap; i64 wide but exact in the f64 reference.
Tensor data(const Shape& shape, DType t, const Args& a, uint64_t seed) {
    if (!is_floating(t)) {
        const double lim = t == DType::i32 ? 0x1p30 : 0x1p40;
        return random_input(shape, t, {.int_lo = t == DType::u8 ? 0 : -lim, .int_hi = lim}, seed);
    }
    if (const auto r = a.draw.range) return random_input(shape, t, {.lo = -*r, .hi = *r}, seed);
    std::vector<double> v =
        values(random_input(shape, DType::f64, {.lo = -4, .hi = 4, .ties = true}, seed));
    for (double& x : v) x = (2 * x + 1) / 4;
    return from_vector(v, shape).to(t);
}

// Inputs in range: the index (input 1) in [0, size of the target's dim).
// index_add's index takes source's length along dim (its case shape says
// only 0-d or 1-d), so a bench case cut 16-fold stays consistent.
std::function<std::vector<Tensor>(const Case&, const Signature&, uint64_t)> generator(Kind k) {
    return [k](const Case& c, const Signature& sig, uint64_t seed) {
        const Shape& target = c.shapes[0];
        const int64_t dim = dim_of(c.args, target.size());
        Shape ishape = c.shapes[1];
        if (k == Kind::index_add && !ishape.empty()) ishape = {c.shapes[2][size_t(dim)]};
        const Domain in_range{.int_lo = 0, .int_hi = double(target[size_t(dim)])};
        std::vector<Tensor> in = {data(target, sig[0], c.args, seed * 31),
                                  random_input(ishape, sig[1], in_range, seed * 31 + 1)};
        if (c.shapes.size() > 2) in.push_back(data(c.shapes[2], sig[2], c.args, seed * 31 + 2));
        return in;
    };
}

// Row-major flat position of `p` in `shape`.
int64_t flat(const Shape& p, const Shape& shape) {
    int64_t f = 0;
    for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + p[d];
    return f;
}

// The reference gathers: out[p] = input[p with p[dim] := the index for p].
Expected gathered(const Sample& s, Kind k) {
    const Tensor& input = s.inputs[0];
    const Tensor index = as_called(s.inputs[1], s.args);
    const std::vector<double> in = values(input), idx = values(index);
    Shape out_shape = index.shape();
    if (k == Kind::select) {
        out_shape = input.shape();
        out_shape[size_t(dim_of(s.args, input.dim()))] = index.numel();
    }
    if (k == Kind::embedding) out_shape.push_back(input.size(1));
    Expected want{out_shape, input.dtype()};
    const int64_t dim = dim_of(s.args, input.dim());
    for (int64_t o = 0; o < shape_numel(out_shape); ++o) {
        Shape p = unravel(o, out_shape);
        if (k == Kind::embedding) {  // weight[indices[p without its last]][p's last]
            p = {int64_t(idx[size_t(o / input.size(1))]), p.back()};
        } else {
            const size_t at = k == Kind::select ? size_t(p[size_t(dim)]) : size_t(o);
            p[size_t(dim)] = int64_t(idx[at]);
        }
        want.outputs[0].values.push_back(in[size_t(flat(p, input.shape()))]);
    }
    return want;
}

// self[q with q[dim] := the index for q] += src[q], q over index's shape
// (index_add: source's) in row-major order: each target's adds in the
// kernels' order. `peak`: the largest magnitude of self or a partial sum;
// `walk`: the largest over elements of the magnitudes of its partial sums
// and its result added up.
struct Scattered {
    std::vector<double> values;
    double peak = 0, walk = 0;
};

Scattered scattered(const Sample& s, Kind k) {
    const Tensor &self = s.inputs[0], &src = s.inputs[2];
    const Tensor index = as_called(s.inputs[1], s.args);
    const int64_t dim = dim_of(s.args, self.dim());
    const Shape over = k == Kind::index_add ? src.shape() : index.shape();
    const std::vector<double> idx = values(index), from = values(src);
    Scattered r{values(self)};
    std::vector<double> walk(r.values.size());
    for (double v : r.values) r.peak = std::max(r.peak, std::abs(v));
    for (int64_t q = 0; q < shape_numel(over); ++q) {
        Shape p = unravel(q, over);
        const double v = from[size_t(flat(p, src.shape()))];
        p[size_t(dim)] = int64_t(idx[size_t(k == Kind::index_add ? p[size_t(dim)] : q)]);
        const size_t t = size_t(flat(p, self.shape()));
        double& o = r.values[t];
        o = self.dtype() == DType::boolean ? double(o != 0 || v != 0) : o + v;
        walk[t] += std::abs(o);
        r.peak = std::max(r.peak, std::abs(o));
    }
    for (size_t t = 0; t < walk.size(); ++t)
        r.walk = std::max(r.walk, walk[t] + std::abs(r.values[t]));
    if (!is_floating(self.dtype()))  // wrapping once at the end equals wrapping every add
        for (double& o : r.values) o = ref::wrap_to(o, self.dtype());
    return r;
}

// The spacing of a dtype's values at 1.
double epsilon(DType t) {
    return t == DType::f16    ? 0x1p-10
           : t == DType::bf16 ? 0x1p-7
           : t == DType::f32  ? 0x1p-23
                              : 0x1p-52;
}

// Gathers copy: exact. Scatters of multiples of 1/4 whose partial sums stay
// below 64 in magnitude add exactly in every float dtype (bf16 holds 8
// significant bits: every multiple of 1/4 below 64), in any order: exact.
// Otherwise each add into an element rounds by at most eps/2 of the partial
// sum it makes, and the reference's rounding to the dtype by eps/2 of the
// result: eps·walk bounds both, twice over (f16 and bf16 add in f32 first).
Tolerance scatter_tolerance(DType t, const Sample& s, Kind k) {
    if (!is_floating(t)) return {0, 0};
    const Scattered r = scattered(s, k);
    if (!s.args.draw.range && r.peak < 64) return {0, 0};
    return {0, epsilon(t) * r.walk};
}

double nbytes(const Tensor& t) { return double(t.numel()) * double(dtype_size(t.dtype())); }

OpEntry index_entry(const char* name, Kind k) {
    OpEntry e;
    e.name = name;
    e.family = Family::index;
    const bool scatter = k == Kind::scatter || k == Kind::index_add;
    e.dtypes = signatures(scatter ? 3 : 2);
    e.generate = generator(k);
    e.layouts = {Layout::contiguous, Layout::transposed, Layout::strided};
    e.cuda_layouts = e.layouts;
    e.cuda = true;
    e.cuda_exact = true;  // copies, and adds in the CPU's order (Note [Sorted scatter_add])
    if (scatter) {
        e.reference = [k](const Sample& s) {
            return Expected{s.inputs[0].shape(), s.inputs[0].dtype(), scattered(s, k).values};
        };
        e.tolerance = [k](DType t, const Sample& s) { return scatter_tolerance(t, s, k); };
        // As bench/nn.cpp counts index_add: self written once, then the part
        // of src that is added read and its targets written, and the index.
        // The src elements added: index's, or all of source for index_add.
        const size_t from = k == Kind::index_add ? 2 : 1;
        e.bytes = [from](const Sample& s, const Outputs& out) {
            const double added = double(s.inputs[from].numel() * out[0].element_size());
            return nbytes(out[0]) + 2 * added + nbytes(s.inputs[1]);
        };
        e.flops = [from](const Sample& s, const Outputs&) {  // one add per element added
            return double(s.inputs[from].numel());
        };
    } else {
        e.reference = [k](const Sample& s) { return gathered(s, k); };
        e.tolerance = [](DType, const Sample&) { return Tolerance{0, 0}; };
        // Each output element read from its row and written, and the index
        // read once (embedding's rows, not the whole table, as bench/nn.cpp).
        e.bytes = [](const Sample& s, const Outputs& out) {
            return 2 * nbytes(out[0]) + nbytes(s.inputs[1]);
        };
    }
    return e;
}

using Pick = Tensor (*)(const Tensor&, int64_t, const Tensor&);
using Add = Tensor (*)(const Tensor&, int64_t, const Tensor&, const Tensor&);

// f(input, dim, index) or f(self, dim, index, src) on an entry's inputs.
template <class R>
std::function<R(const std::vector<Tensor>&, const Args&)> bind(Pick f) {
    return [f](const std::vector<Tensor>& x, const Args& a) -> R {
        return f(x[0], a.dims.at(0), as_called(x[1], a));
    };
}
template <class R>
std::function<R(const std::vector<Tensor>&, const Args&)> bind(Add f) {
    return [f](const std::vector<Tensor>& x, const Args& a) -> R {
        return f(x[0], a.dims.at(0), as_called(x[1], a), x[2]);
    };
}

// An in-place front on a copy of self laid out as self (gaps included): the
// sample's input stays untouched, and the front writes through its layout.
Outputs in_place(Add f, const std::vector<Tensor>& x, const Args& a) {
    const Tensor& self = x[0];
    Tensor copy = self.clone();
    if (self.numel() > 0) {
        int64_t extent = 1;
        for (int64_t d = 0; d < self.dim(); ++d) extent += (self.size(d) - 1) * self.stride(d);
        copy = zeros({extent}, {self.dtype(), self.device()})
                   .as_strided(self.shape(), self.strides(), 0);
        copy.copy_(self);
    }
    const Tensor r = f(copy, a.dims.at(0), as_called(x[1], a), x[2]);
    EMBER_CHECK(r.is_same(copy), "op table: an in-place index front did not return self");
    return r.contiguous();
}

// clang-format off
const std::vector<Shape> kShapes = {{5}, {4, 3}, {2, 3, 4}, {3, 1, 5}, {2, 0, 3}, {1, 1, 1}, {2, 3, 2, 3}};
const std::vector<Shape> kCudaShapes = {{5}, {4, 3}, {2, 3, 4}, {3, 1, 5}, {2, 0, 3}, {1, 1, 1}, {3, 2, 7, 33}};
const std::vector<Shape> kScatterShapes = {{5}, {4, 3}, {2, 3, 4}, {3, 1, 5}, {2, 0, 3}, {1, 1}};
const std::vector<Shape> kIndexAddShapes = {{6}, {4, 3}, {2, 3, 4}, {3, 1, 2}, {2, 0, 3}};
// clang-format on

// Every dim of every shape, negative for every other case: f(case, shape, dim).
template <class F>
std::vector<Case> each_dim(const std::vector<Shape>& shapes, F f) {
    std::vector<Case> out;
    int64_t k = 0;
    for (const Shape& s : shapes)
        for (int64_t d = 0; d < int64_t(s.size()); ++d, ++k) {
            Case c = f(k, s, d);
            c.args.dims = {k % 2 ? d - int64_t(s.size()) : d};
            out.push_back(c);
        }
    return out;
}

// index_select: 1-d indices of 1 to max_len entries (empty into a size-0 dim).
std::vector<Case> select_cases(const std::vector<Shape>& shapes, int64_t max_len) {
    return each_dim(shapes, [=](int64_t k, const Shape& s, int64_t d) {
        return Case{{s, {s[size_t(d)] == 0 ? 0 : 1 + k % max_len}}};
    });
}

// gather: index up to input's size off dim (one less every other dim), 1 to
// max_len along it.
std::vector<Case> gather_cases(const std::vector<Shape>& shapes, int64_t max_len, bool trim) {
    return each_dim(shapes, [=](int64_t k, const Shape& s, int64_t d) {
        Shape i = s;
        for (size_t j = 0; j < s.size(); ++j)
            i[j] = int64_t(j) == d ? (s[j] == 0 ? 0 : 1 + (k + int64_t(j)) % max_len)
                                   : s[j] - (trim && s[j] > 0 ? (k + int64_t(j)) % 2 : 0);
        return Case{{s, i}};
    });
}

// scatter_add: index longer than self along dim (repeats), up to self's size
// off it; src one larger than index in every other dim.
std::vector<Case> scatter_cases() {
    return each_dim(kScatterShapes, [](int64_t k, const Shape& s, int64_t d) {
        Shape i = s, src = s;
        for (size_t j = 0; j < s.size(); ++j) {
            i[j] = int64_t(j) == d ? (s[j] == 0 ? 0 : 2 * s[j] + k % 3)
                                   : s[j] - (s[j] > 0 ? (k + int64_t(j)) % 2 : 0);
            src[j] = i[j] + int64_t(j) % 2;
        }
        return Case{{s, i, src}};
    });
}

// index_add: self, a 1-d index of len, source of self's shape but len along dim.
Case index_add_case(const Shape& self, int64_t dim, int64_t len, Args a = {}) {
    Shape source = self;
    source[size_t(dim)] = len;
    a.dims = {dim};
    return {{self, {len}, source}, a};
}

// CUDA against the CPU for scatter_add and index_add: few targets and long
// lines, where the order of the adds shows (self, index = src, dim).
struct ScatterCuda {
    Shape self, index;
    int64_t dim;
};
// clang-format off
const std::vector<ScatterCuda> kScatterCuda = {
    {{5, 7}, {40, 7}, 0}, {{6, 3, 4}, {6, 30, 4}, 1}, {{9}, {200}, 0}, {{4, 5}, {3, 60}, 1},
    {{1, 1}, {1, 1}, 0},  {{3, 8, 2}, {2, 7, 50}, 2}, {{2, 0, 3}, {2, 0, 3}, 0},
    {{64, 300}, {5000, 300}, 0}};
// clang-format on
const Args kOrder = {.draw = {.range = 100}};  // fractional values: the order of the adds shows

int64_t lookups(bool quick) { return quick ? 4096 : 65536; }

OpEntry index_select_entry() {
    OpEntry e = index_entry("index_select", Kind::select);
    e.raw = bind<Outputs>(kernels::index_select);
    e.differentiable = bind<Tensor>(ember::index_select);
    e.cases = select_cases(kShapes, 7);
    e.cases.push_back({{{4, 3}, {}}, {.dims = {0}}});  // a 0-d index keeps the dim, size 1
    e.cases.push_back(
        {{{4, 3}, {6}}, {.dims = {1}, .draw = {.expanded_index = true}}});  // one index, repeated
    e.cases.push_back({{{20000, 3}, {40000}}, {.dims = {0}}});              // threads
    // Rows of a 32768 × 256 table, as the embedding's gather (its row: "embedding fwd").
    e.bench_cases = [](bool quick) {
        return std::vector<Case>{{{{32768, 256}, {lookups(quick)}}, {.dims = {0}}}};
    };
    e.grad_cases = {{{{4, 3}, {5}}, {.dims = {0}}},
                    {{{4, 3}, {2}}, {.dims = {1}}},
                    {{{2, 3, 4}, {6}}, {.dims = {-1}}},
                    {{{4, 3}, {}}, {.dims = {0}}}};
    e.cuda_cases = select_cases(kCudaShapes, 9);
    return e;
}

OpEntry gather_entry() {
    OpEntry e = index_entry("gather", Kind::gather);
    e.raw = bind<Outputs>(kernels::gather);
    e.differentiable = bind<Tensor>(ember::gather);
    e.cases = gather_cases(kShapes, 6, true);
    e.cases.push_back({{{5, 4}, {3, 6}}, {.dims = {1}, .draw = {.expanded_index = true}}});
    e.cases.push_back({{{300, 200}, {300, 250}}, {.dims = {1}}});  // threads
    e.grad_cases = {{{{4, 3}, {5, 3}}, {.dims = {0}}},
                    {{{4, 3}, {3, 2}}, {.dims = {1}}},
                    {{{2, 3, 4}, {2, 2, 6}}, {.dims = {-1}}}};
    e.cuda_cases = gather_cases(kCudaShapes, 5, false);
    e.bench_cases = [](bool quick) {
        const int64_t n = quick ? 1024 : 4096;
        return std::vector<Case>{{{{n, n}, {n, n}}, {.dims = {1}}}};
    };
    return e;
}

// scatter_add or index_add: the out-of-place front and its differentiable
// op, or (diff null) the in-place front on a copy of self. The in-place forms
// run the same kernel: they have no bench rows of their own.
OpEntry adding(const char* name, Kind k, Add raw, Add diff) {
    OpEntry e = index_entry(name, k);
    if (diff) {
        e.raw = bind<Outputs>(raw);
        e.differentiable = bind<Tensor>(diff);
    } else {
        e.raw = [raw](const std::vector<Tensor>& x, const Args& a) { return in_place(raw, x, a); };
    }
    return e;
}

OpEntry scatter_add_entry(bool in_place_form) {
    OpEntry e =
        in_place_form
            ? adding("scatter_add_", Kind::scatter, kernels::scatter_add_, nullptr)
            : adding("scatter_add", Kind::scatter, kernels::scatter_add, ember::scatter_add);
    if (!in_place_form) {
        e.grad_cases = {{{{4, 3}, {6, 3}, {6, 3}}, {.dims = {0}}},
                        {{{2, 3, 4}, {2, 2, 7}, {2, 3, 7}}, {.dims = {-1}}}};
        e.bench_cases = [](bool quick) {
            const int64_t n = quick ? 1024 : 4096;
            return std::vector<Case>{{{{n, n}, {n, n}, {n, n}}, {.dims = {1}}}};
        };
    }
    e.cases = scatter_cases();
    e.cases.push_back({{{4, 5}, {3, 9}, {3, 9}}, {.dims = {1}, .draw = {.expanded_index = true}}});
    e.cases.push_back(
        {{{6, 5}, {6, 9}, {6, 9}}, {.dims = {1}, .draw = {.range = 2}}});     // rounding shows
    e.cases.push_back({{{300, 7}, {300, 200}, {300, 200}}, {.dims = {-1}}});  // long lines
    e.cases.push_back({{{8, 4096}, {64, 4096}, {64, 4096}}, {.dims = {0}}});  // threads
    for (const ScatterCuda& c : kScatterCuda) {
        Args a = kOrder;
        a.dims = {c.dim};
        e.cuda_cases.push_back({{c.self, c.index, c.index}, a});
    }
    // An index shared by every line: the sorted path (Note [Sorted scatter_add]).
    e.cuda_cases.push_back({{{3, 50}, {3, 200}, {3, 200}},
                            {.dims = {1}, .draw = {.expanded_index = true, .range = 100}}});
    return e;
}

OpEntry index_add_entry(bool in_place_form) {
    OpEntry e = in_place_form
                    ? adding("index_add_", Kind::index_add, kernels::index_add_, nullptr)
                    : adding("index_add", Kind::index_add, kernels::index_add, ember::index_add);
    if (!in_place_form) {
        e.grad_cases = {index_add_case({4, 3}, 0, 7),
                        index_add_case({2, 3, 4}, 1, 5),
                        {{{4, 3}, {}, {1, 3}}, {.dims = {0}}}};
        // bench/nn.cpp's row: embedding's backward as an index_add of the rows.
        e.bench_cases = [](bool quick) {
            return std::vector<Case>{index_add_case({32768, 256}, 0, lookups(quick))};
        };
        e.bench_label = [](const Case&) { return std::string("embedding bwd (index_add)"); };
    }
    int64_t k = 0;  // twice self's size along dim and one more (none into 0), every
    for (const Shape& s : kIndexAddShapes)  // third case with fractional values
        for (int64_t d = 0; d < int64_t(s.size()); ++d, ++k) {
            Args a;
            if (k % 3 == 0) a.draw.range = 2;
            e.cases.push_back(index_add_case(s, d, s[size_t(d)] ? 2 * s[size_t(d)] + 1 : 0, a));
        }
    e.cases.push_back({{{4, 3}, {}, {1, 3}}, {.dims = {0}}});  // a 0-d index
    e.cases.push_back(index_add_case({4, 3}, 1, 5, {.draw = {.expanded_index = true}}));
    e.cases.push_back(index_add_case({64, 100}, 0, 1000));  // threads
    for (const ScatterCuda& c : kScatterCuda)
        e.cuda_cases.push_back(index_add_case(c.self, c.dim, c.index[size_t(c.dim)], kOrder));
    // The sorted path: embedding's backward (1000 rows, 20000 tokens), along
    // each dim, a self dim of 1 (one run of every element), lines just under
    // the threshold (Note [Sorted scatter_add]).
    for (const auto& [self, dim, len] : std::vector<std::tuple<Shape, int64_t, int64_t>>{
             {{1000, 64}, 0, 20000},
             {{37, 300}, 1, 5000},
             {{6, 50, 5}, 1, 999},
             {{333}, 0, 100000},
             {{1}, 0, 64},
             {{1, 7}, 0, 65},
             {{5, kernels::cuda::kSortedMaxLines - 1}, 0, 64}})
        e.cuda_cases.push_back(index_add_case(self, dim, len, kOrder));
    return e;
}

OpEntry embedding_entry() {
    OpEntry e = index_entry("embedding", Kind::embedding);
    e.raw = [](const std::vector<Tensor>& x, const Args& a) {
        return kernels::embedding(x[0], as_called(x[1], a));
    };
    e.differentiable = [](const std::vector<Tensor>& x, const Args& a) {
        return ember::embedding(x[0], as_called(x[1], a));
    };
    int64_t d = 0;
    for (const Shape& i : std::vector<Shape>{{}, {5}, {3, 4}, {2, 0, 3}, {2, 3, 4}, {7, 1}})
        e.cases.push_back({{{10, 1 + d++ % 6}, i}});
    e.cases.push_back({{{10, 4}, {4, 9}}, {.draw = {.expanded_index = true}}});
    e.cases.push_back({{{5000, 3}, {40000}}});  // threads
    e.grad_cases = {
        {{{6, 4}, {3, 5}}}, {{{6, 4}, {}}}, {{{6, 4}, {4, 3}}, {.draw = {.expanded_index = true}}}};
    // CUDA against the CPU: a batch of tokens, an expanded and a 0-d index,
    // and more tokens than one wave of blocks.
    e.cuda_cases = {{{{50, 33}, {7, 13}}},
                    {{{50, 33}, {4, 9}}, {.draw = {.expanded_index = true}}},
                    {{{50, 33}, {}}},
                    {{{1000, 257}, {64, 129}}}};
    e.bench_cases = [](bool quick) {
        return std::vector<Case>{{{{32768, 256}, {lookups(quick)}}}};
    };
    e.bench_label = [](const Case&) { return std::string("embedding fwd"); };
    return e;
}

}  // namespace

std::vector<OpEntry> index_entries() {
    return {index_select_entry(),    gather_entry(),         scatter_add_entry(false),
            scatter_add_entry(true), index_add_entry(false), index_add_entry(true),
            embedding_entry()};
}

}  // namespace ember::test
