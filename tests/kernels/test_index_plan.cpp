// How the CUDA index kernels walk their operands (kernels/cuda/index_plan.h),
// checked on the CPU: coalescing keeps every element's offset in every
// operand, scatter_add's lines cover each index element exactly once and
// never share a target, and the CUDA scatter_add emulated line by line with
// the plan gives the CPU kernel's bits; sizes 0 and 1, stride-0 operands and
// counts past 2^31. The sorted path (Note [Sorted scatter_add]): when it is
// taken, its keys and end bit, and its algorithm emulated (a stable sort, then
// one fold per run and line) giving the CPU's bits, bad indices skipped.
#include <algorithm>
#include <cstring>
#include <random>
#include <set>
#include <utility>

#include "kernels/cpu/index.h"
#include "kernels/cuda/index_plan.h"
#include "kernels/front.h"
#include "kernels/index.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;
using kernels::View;

namespace {

View make(const Shape& shape, const Shape& strides) {
    View v;
    v.ndim = int(shape.size());
    for (int d = 0; d < v.ndim; ++d) v.shape[d] = shape[size_t(d)], v.strides[d] = strides[size_t(d)];
    return v;
}

// Row-major strides of `shape`, then dims permuted by `perm` and some zeroed
// (a transposed or expanded operand).
Shape layout_strides(const Shape& shape, std::mt19937& rng, bool zeros = true) {
    Shape order(shape.size());
    for (size_t d = 0; d < order.size(); ++d) order[d] = int64_t(d);
    if (rng() % 2) std::shuffle(order.begin(), order.end(), rng);
    Shape strides(shape.size());
    int64_t step = 1;
    for (size_t j = order.size(); j-- > 0;) {
        strides[size_t(order[j])] = step;
        step *= std::max<int64_t>(shape[size_t(order[j])], 1);
    }
    for (auto& s : strides)
        if (zeros && rng() % 5 == 0) s = 0;
    return strides;
}

}  // namespace

TEST_CASE("cuda index plan: coalesce keeps every offset and merges what it can", "[plan][index]") {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 400; ++trial) {
        const int nd = int(rng() % 6);
        Shape shape;
        for (int d = 0; d < nd; ++d) shape.push_back(int64_t(rng() % 4) + (rng() % 3 == 0 ? 0 : 1));
        View v[3];
        for (View& x : v) x = make(shape, layout_strides(shape, rng));
        const View before[3] = {v[0], v[1], v[2]};
        kernels::cuda::coalesce(v);
        const int64_t n = before[0].numel();
        INFO("shape " << shape_str(shape));
        REQUIRE(v[0].numel() == n);
        CHECK(v[0].ndim <= before[0].ndim);
        for (int kk = 0; kk < 3; ++kk) {
            REQUIRE(v[kk].ndim == v[0].ndim);
            for (int64_t i = 0; i < n; ++i)
                CHECK(kernels::cuda::view_offset(v[kk], i) ==
                      kernels::cuda::view_offset(before[kk], i));
        }
        if (n > 0)
            for (int d = 0; d < v[0].ndim; ++d) CHECK(v[0].shape[d] > 1);  // size-1 dims dropped
    }
    // Contiguous operands become one dim; a transposed one keeps two.
    View c[2] = {make({2, 3, 4}, {12, 4, 1}), make({2, 3, 4}, {0, 0, 0})};
    kernels::cuda::coalesce(c);
    CHECK((c[0].ndim == 1 && c[0].shape[0] == 24 && c[1].strides[0] == 0));
    View t[1] = {make({3, 1, 5}, {1, 7, 3})};
    kernels::cuda::coalesce(t);
    CHECK((t[0].ndim == 2 && t[0].shape[0] == 3 && t[0].shape[1] == 5));
    // A single element: no dims, offset 0.
    View one[1] = {make({1, 1}, {5, 9})};
    kernels::cuda::coalesce(one);
    CHECK(one[0].ndim == 0);
    CHECK(kernels::cuda::view_offset(one[0], 0) == 0);
}

TEST_CASE("cuda index plan: scatter lines cover each index element once, targets disjoint",
          "[plan][index]") {
    std::mt19937 rng(11);
    for (int trial = 0; trial < 200; ++trial) {
        const int nd = 1 + int(rng() % 4);
        const int dim = int(rng() % uint32_t(nd));
        Shape ishape, sshape;
        for (int d = 0; d < nd; ++d) {
            ishape.push_back(int64_t(rng() % 4) + 1);
            sshape.push_back(ishape.back() + int64_t(rng() % 2));
        }
        // self has no stride-0 dims (the front refuses them)
        const View self = make(sshape, layout_strides(sshape, rng, false));
        const View index = make(ishape, layout_strides(ishape, rng));
        const View src = make(ishape, layout_strides(ishape, rng));
        const kernels::cuda::ScatterLines s = kernels::cuda::scatter_lines(self, index, src, dim);
        INFO("index " << shape_str(ishape) << " dim " << dim);
        REQUIRE(s.lines * s.len == index.numel());
        CHECK(s.len == ishape[size_t(dim)]);
        // Every (line, k) names the index and src elements of one position q
        // of index's shape, and each q is named once.
        std::multiset<std::pair<int64_t, int64_t>> got, want;
        std::set<int64_t> line_starts;
        for (int64_t l = 0; l < s.lines; ++l) {
            line_starts.insert(kernels::cuda::view_offset(s.self, l));
            for (int64_t kk = 0; kk < s.len; ++kk)
                got.insert({kernels::cuda::view_offset(s.index, l) + kk * s.index_step,
                            kernels::cuda::view_offset(s.src, l) + kk * s.src_step});
        }
        for (int64_t q = 0; q < index.numel(); ++q)
            want.insert({kernels::cuda::view_offset(index, q), kernels::cuda::view_offset(src, q)});
        CHECK(got == want);
        // Lines start at distinct elements of self outside dim: no shared targets.
        CHECK(int64_t(line_starts.size()) == s.lines);
    }
}

TEST_CASE("cuda index plan: line counts and offsets past 2^31", "[plan][index]") {
    // index [2^20, 3, 2^12] along dim 1: 2^32 lines of 3, no memory needed.
    const int64_t a = int64_t(1) << 20, b = int64_t(1) << 12;
    const View index = make({a, 3, b}, {3 * b, b, 1});
    const View self = make({a, 5, b}, {5 * b, b, 1});
    const kernels::cuda::ScatterLines s = kernels::cuda::scatter_lines(self, index, index, 1);
    CHECK(s.lines == a * b);
    CHECK(s.lines > (int64_t(1) << 31));
    CHECK(s.self_step == b);
    const int64_t last = s.lines - 1;
    CHECK(kernels::cuda::view_offset(s.self, last) == (a - 1) * 5 * b + (b - 1));
    CHECK(kernels::cuda::view_offset(s.index, last) == (a - 1) * 3 * b + (b - 1));
}

namespace {

// index.cu's scatter_add_kernel, line by line on the host (f32, i64 index).
void emulate_scatter_add(const View& self, const View& index, const View& src, int dim) {
    const kernels::cuda::ScatterLines s = kernels::cuda::scatter_lines(self, index, src, dim);
    float* o = self.ptr<float>();
    const int64_t* ix = index.ptr<const int64_t>();
    const float* r = src.ptr<const float>();
    for (int64_t l = 0; l < s.lines; ++l) {
        const int64_t i0 = kernels::cuda::view_offset(s.index, l),
                      o0 = kernels::cuda::view_offset(s.self, l),
                      r0 = kernels::cuda::view_offset(s.src, l);
        for (int64_t kk = 0; kk < s.len; ++kk) {
            const int64_t i = ix[i0 + kk * s.index_step];
            if (i < 0 || i >= self.shape[dim]) continue;
            o[o0 + i * s.self_step] += r[r0 + kk * s.src_step];
        }
    }
}

}  // namespace

TEST_CASE("cuda index plan: the emulated scatter_add gives the CPU's bits", "[plan][index]") {
    struct Case {
        Shape self, index;
        int dim;
    };
    const Case cases[] = {{{5, 7}, {40, 7}, 0},  {{6, 3, 4}, {6, 30, 4}, 1}, {{9}, {200}, 0},
                          {{4, 5}, {3, 60}, 1},  {{1, 1}, {1, 1}, 0},        {{3, 8, 2}, {2, 7, 50}, 2}};
    uint64_t seed = 3;
    for (const Case& c : cases)
        for (bool transposed : {false, true}) {
            INFO("self " << shape_str(c.self) << " index " << shape_str(c.index) << " dim " << c.dim);
            Tensor self0 = random_tensor(c.self, DType::f32, ++seed);
            if (transposed) self0 = non_contiguous(self0);
            // Few targets, many repeats: sums of 10+ terms where order shows.
            Generator g(++seed);
            const Tensor index = randint(0, c.self[size_t(c.dim)], c.index, {DType::i64}, &g);
            const Tensor src = random_tensor(c.index, DType::f32, ++seed, -1e3, 1e3);
            const Tensor want = kernels::scatter_add(self0, c.dim, index, src);
            Tensor got = self0.contiguous();
            if (transposed) got = non_contiguous(got);
            emulate_scatter_add(kernels::view_of(got), kernels::view_of(index),
                                kernels::view_of(src), c.dim);
            const std::vector<float> a = got.contiguous().to_vector<float>(),
                                     b = want.contiguous().to_vector<float>();
            CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
        }
}

namespace {

// A 1-d index seen through `shape`, stepping only along dim (the front's
// spread_index: index_add and embedding's backward).
View spread(const Tensor& index, const Shape& shape, int dim) {
    Shape strides(shape.size(), 0);
    strides[size_t(dim)] = index.stride(0);
    View v = make(shape, strides);
    v.data = static_cast<char*>(index.data_ptr());
    v.dtype = index.dtype();
    return v;
}

}  // namespace

TEST_CASE("cuda index plan: the sorted scatter_add is taken for a shared index only",
          "[plan][index]") {
    // Embedding's backward: self [1000, 64], 20000 tokens along dim 0.
    const View self = make({1000, 64}, {64, 1});
    const View src = make({20000, 64}, {64, 1});
    const View shared = make({20000, 64}, {1, 0});
    kernels::cuda::ScatterLines s = kernels::cuda::scatter_lines(self, shared, src, 0);
    CHECK(s.lines == 64);
    CHECK(s.len == 20000);
    CHECK(kernels::cuda::index_shared(s));
    CHECK(kernels::cuda::use_sorted_scatter(s, 1000));
    // scatter_add's own index, different in every line: the line kernel.
    const View own = make({20000, 64}, {64, 1});
    s = kernels::cuda::scatter_lines(self, own, src, 0);
    CHECK_FALSE(kernels::cuda::index_shared(s));
    CHECK_FALSE(kernels::cuda::use_sorted_scatter(s, 1000));
    // Shared but too short lines, or too many lines.
    s = kernels::cuda::scatter_lines(self, make({63, 64}, {1, 0}), make({63, 64}, {64, 1}), 0);
    CHECK(kernels::cuda::index_shared(s));
    CHECK_FALSE(kernels::cuda::use_sorted_scatter(s, 1000));
    s = kernels::cuda::scatter_lines(self, make({64, 64}, {1, 0}), make({64, 64}, {64, 1}), 0);
    CHECK(kernels::cuda::use_sorted_scatter(s, 1000));
    for (const int64_t lines :
         {kernels::cuda::kSortedMaxLines - 1, kernels::cuda::kSortedMaxLines}) {
        const View wide = make({10, lines}, {lines, 1});
        s = kernels::cuda::scatter_lines(wide, make({100, lines}, {1, 0}),
                                         make({100, lines}, {lines, 1}), 0);
        CHECK(s.lines == lines);
        CHECK(kernels::cuda::use_sorted_scatter(s, 10) == (lines < kernels::cuda::kSortedMaxLines));
    }
    // Along dim 1 (index_add of columns): the index is shared by the rows.
    s = kernels::cuda::scatter_lines(make({7, 30}, {30, 1}), make({7, 500}, {0, 2}),
                                     make({7, 500}, {500, 1}), 1);
    CHECK(s.lines == 7);
    CHECK(s.index_step == 2);
    CHECK(kernels::cuda::use_sorted_scatter(s, 30));
    // A 1-d self: one line, shared trivially; an index constant along dim too.
    s = kernels::cuda::scatter_lines(make({9}, {1}), make({200}, {1}), make({200}, {1}), 0);
    CHECK(s.lines == 1);
    CHECK(kernels::cuda::use_sorted_scatter(s, 9));
    s = kernels::cuda::scatter_lines(self, make({100, 64}, {0, 0}), make({100, 64}, {64, 1}), 0);
    CHECK(kernels::cuda::use_sorted_scatter(s, 1000));
    // Keys and the sentinel must fit 32 bits.
    s = kernels::cuda::scatter_lines(make({9}, {1}), make({200}, {1}), make({200}, {1}), 0);
    CHECK(kernels::cuda::use_sorted_scatter(s, (int64_t(1) << 32) - 1));
    CHECK_FALSE(kernels::cuda::use_sorted_scatter(s, int64_t(1) << 32));
}

TEST_CASE("cuda index plan: sorted keys put bad indices last, end bits cover the sentinel",
          "[plan][index]") {
    CHECK(kernels::cuda::sorted_key(0, 10) == 0);
    CHECK(kernels::cuda::sorted_key(9, 10) == 9);
    CHECK(kernels::cuda::sorted_key(10, 10) == 10);
    CHECK(kernels::cuda::sorted_key(-1, 10) == 10);
    CHECK(kernels::cuda::sorted_key(int64_t(1) << 40, 10) == 10);
    CHECK(kernels::cuda::sorted_key(-(int64_t(1) << 40), 10) == 10);
    for (int64_t size : {int64_t(0), int64_t(1), int64_t(2), int64_t(3), int64_t(1000),
                         int64_t(1023), int64_t(1024), int64_t(32768), (int64_t(1) << 32) - 1}) {
        const int bits = kernels::cuda::sorted_end_bit(size);
        INFO("size " << size);
        CHECK(bits >= 1);
        CHECK(bits <= 32);
        CHECK(uint64_t(size) < (uint64_t(1) << bits));  // the sentinel fits
        if (bits > 1) CHECK(uint64_t(size) >= (uint64_t(1) << (bits - 1)));  // no bit to spare
    }
    CHECK(kernels::cuda::sorted_end_bit(1000) == 10);
    CHECK(kernels::cuda::sorted_end_bit(1024) == 11);
}

TEST_CASE("cuda index plan: the sorted sum launch gives each (position, line) one thread",
          "[plan][index]") {
    for (const int64_t lines : {int64_t(1), int64_t(2), int64_t(7), int64_t(32), int64_t(64),
                                int64_t(255), int64_t(256), int64_t(300), int64_t(1000)})
        for (const int64_t len : {int64_t(64), int64_t(65), int64_t(777)})
            for (const int64_t cap : {int64_t(1), int64_t(5), kernels::cuda::kSortedMaxGridX}) {
                const kernels::cuda::SortedSumLaunch p =
                    kernels::cuda::sorted_sum_launch(lines, len, cap);
                const int64_t along = int64_t(1) << p.line_shift;
                INFO("lines " << lines << " len " << len << " cap " << cap);
                CHECK(along * p.per_block == kernels::cuda::kSortedBlock);
                CHECK((along >= lines || along == kernels::cuda::kSortedBlock));
                CHECK((along == 1 || along / 2 < lines));  // no wider than the lines need
                CHECK(p.grid_x <= cap);
                CHECK(p.grid_y <= 65535);
                std::vector<int> seen(size_t(lines * len), 0);
                for (int64_t by = 0; by < p.grid_y; ++by)
                    for (int64_t bx = 0; bx < p.grid_x; ++bx)
                        for (int64_t t = 0; t < kernels::cuda::kSortedBlock; ++t) {
                            const int64_t l = by * along + (t & (along - 1));
                            if (l >= lines) continue;
                            for (int64_t kk = bx * p.per_block + (t >> p.line_shift); kk < len;
                                 kk += p.grid_x * p.per_block)
                                ++seen[size_t(kk * lines + l)];
                        }
                CHECK(std::count(seen.begin(), seen.end(), 1) == lines * len);
            }
    // The largest shared-index case: lines just under the limit, blocks of one line per k.
    const kernels::cuda::SortedSumLaunch big =
        kernels::cuda::sorted_sum_launch(kernels::cuda::kSortedMaxLines - 1, int64_t(1) << 31);
    CHECK(big.line_shift == 8);
    CHECK(big.grid_y == 128);
    CHECK(big.grid_x == kernels::cuda::kSortedMaxGridX);
}

namespace {

// index_sorted.cu on the host: the keys kernel, a stable sort of (key,
// position) (what CUB's radix sort gives), then the sum kernel's threads
// (k, l) as its launch maps them (max_grid_x small: the grid-stride steps
// too), folding each run in position order — or, with `reverse`, in the
// opposite order, to show the comparison can tell. Returns whether a bad
// index was seen.
template <class T, class I>
bool emulate_sorted_scatter_add(const View& self, const View& index, const View& src, int dim,
                                bool reverse = false,
                                int64_t max_grid_x = kernels::cuda::kSortedMaxGridX) {
    const kernels::cuda::ScatterLines s = kernels::cuda::scatter_lines(self, index, src, dim);
    const int64_t size = self.shape[dim];
    REQUIRE(kernels::cuda::use_sorted_scatter(s, size));
    bool bad = false;
    std::vector<std::pair<uint32_t, int32_t>> pairs(size_t(s.len));
    for (int64_t kk = 0; kk < s.len; ++kk) {
        const int64_t i = int64_t(index.ptr<const I>()[kk * s.index_step]);
        bad = bad || i < 0 || i >= size;
        pairs[size_t(kk)] = {kernels::cuda::sorted_key(i, size), int32_t(kk)};
    }
    std::stable_sort(pairs.begin(), pairs.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    T* o = self.ptr<T>();
    const T* r = src.ptr<const T>();
    // The sum kernel's threads, block by block, as sorted_sum_launch maps them.
    const kernels::cuda::SortedSumLaunch p =
        kernels::cuda::sorted_sum_launch(s.lines, s.len, max_grid_x);
    const int64_t along = int64_t(1) << p.line_shift;
    for (int64_t by = 0; by < p.grid_y; ++by)
        for (int64_t bx = 0; bx < p.grid_x; ++bx)
            for (int64_t t = 0; t < kernels::cuda::kSortedBlock; ++t) {
                const int64_t l = by * along + (t & (along - 1));
                if (l >= s.lines) continue;
                for (int64_t kk = bx * p.per_block + (t >> p.line_shift); kk < s.len;
                     kk += p.grid_x * p.per_block) {
                    const uint32_t key = pairs[size_t(kk)].first;
                    if (key == uint32_t(size) || (kk > 0 && pairs[size_t(kk - 1)].first == key))
                        continue;
                    int64_t end = kk;
                    while (end < s.len && pairs[size_t(end)].first == key) ++end;
                    T* dst = o + kernels::cuda::view_offset(s.self, l) + int64_t(key) * s.self_step;
                    const T* from = r + kernels::cuda::view_offset(s.src, l);
                    T acc = *dst;
                    for (int64_t j = kk; j < end; ++j) {
                        const int64_t q = pairs[size_t(reverse ? end - 1 - (j - kk) : j)].second;
                        acc = kernels::scatter_add_step(acc, from[q * s.src_step]);
                    }
                    *dst = acc;
                }
            }
    return bad;
}

bool same_bits(const Tensor& a, const Tensor& b) {
    const Tensor x = a.contiguous(), y = b.contiguous();
    return x.dtype() == y.dtype() && x.numel() == y.numel() &&
           std::memcmp(x.data_ptr(), y.data_ptr(), size_t(x.numel()) * dtype_size(x.dtype())) == 0;
}

}  // namespace

TEST_CASE("cuda index plan: the emulated sorted scatter_add gives the CPU's bits",
          "[plan][index]") {
    struct Case {
        Shape self;
        int dim;
        int64_t len, distinct;  // index length; values drawn from [0, distinct)
    };
    // Embedding-backward-like shapes, index_add along inner and middle dims,
    // a 1-d self, a self dim of 1; few distinct values: long runs.
    const Case cases[] = {{{1000, 64}, 0, 3000, 40}, {{50, 33}, 0, 777, 50}, {{5, 30}, 1, 500, 7},
                          {{3, 20, 4}, 1, 300, 20},  {{9}, 0, 200, 9},       {{1, 17}, 0, 64, 1},
                          {{40, 24}, 0, 528, 40}};
    uint64_t seed = 100;
    int case_no = 0;
    for (const Case& c : cases)
        for (DType dt : {DType::f32, DType::bf16, DType::i64})
            for (DType it : {DType::i64, DType::i32}) {
                ++case_no;
                const bool strided = case_no % 2, with_bad = case_no % 3 == 0;
                const int64_t size = c.self[size_t(c.dim)];
                INFO("self " << shape_str(c.self) << " dim " << c.dim << " len " << c.len << " "
                             << dtype_name(dt) << " index " << dtype_name(it)
                             << (strided ? " strided" : "") << (with_bad ? " bad" : ""));
                Tensor self0 = random_tensor(c.self, dt, ++seed, -100, 100);
                if (strided) self0 = non_contiguous(self0);
                Shape sshape = c.self;
                sshape[size_t(c.dim)] = c.len;
                Tensor src = random_tensor(sshape, dt, ++seed, -100, 100);
                if (strided) src = non_contiguous(src);
                Generator g(++seed);
                std::vector<int64_t> values =
                    randint(0, std::min(c.distinct, size), {c.len}, {DType::i64}, &g).to_vector<int64_t>();
                if (with_bad)  // bad values at both ends and inside, above and below
                    for (int64_t at : {int64_t(0), c.len / 3, c.len - 1})
                        values[size_t(at)] = at % 2 ? size + at : -1 - at;
                Tensor index = from_vector(values, {c.len}).to(it);
                if (strided) index = non_contiguous(index);  // stride 2
                const View iv = spread(index, sshape, c.dim), rv = kernels::view_of(src);

                Tensor want = self0.contiguous();
                if (strided) want = non_contiguous(want);
                const auto first_bad =
                    kernels::cpu::scatter_add(kernels::view_of(want), iv, rv, c.dim);
                CHECK(first_bad.has_value() == with_bad);
                Tensor got = self0.contiguous();
                if (strided) got = non_contiguous(got);
                bool saw_bad = false;
                visit_dtype(dt, [&](auto data_tag) {
                    using T = typename decltype(data_tag)::type;
                    const int64_t cap = case_no % 4 == 0 ? 3 : kernels::cuda::kSortedMaxGridX;
                    if (it == DType::i64)
                        saw_bad = emulate_sorted_scatter_add<T, int64_t>(kernels::view_of(got), iv,
                                                                         rv, c.dim, false, cap);
                    else
                        saw_bad = emulate_sorted_scatter_add<T, int32_t>(kernels::view_of(got), iv,
                                                                         rv, c.dim, false, cap);
                });
                CHECK(saw_bad == with_bad);
                CHECK(same_bits(got, want));
            }
}

TEST_CASE("cuda index plan: folding runs out of order would show", "[plan][index]") {
    // bf16 sums of ~100 terms each: the reversed fold must not match, or the
    // test above could not tell the sorted path's order from any other.
    const Tensor self0 = random_tensor({10, 16}, DType::bf16, 1, -100, 100);
    const Tensor src = random_tensor({1000, 16}, DType::bf16, 2, -100, 100);
    Generator g(3);
    const Tensor index = randint(0, 10, {1000}, {DType::i64}, &g);
    const View iv = spread(index, {1000, 16}, 0), rv = kernels::view_of(src);
    Tensor want = self0.clone(), fwd = self0.clone(), rev = self0.clone();
    (void)kernels::cpu::scatter_add(kernels::view_of(want), iv, rv, 0);
    emulate_sorted_scatter_add<BFloat16, int64_t>(kernels::view_of(fwd), iv, rv, 0);
    emulate_sorted_scatter_add<BFloat16, int64_t>(kernels::view_of(rev), iv, rv, 0, true);
    CHECK(same_bits(fwd, want));
    CHECK_FALSE(same_bits(rev, want));
}
