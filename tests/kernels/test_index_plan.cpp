// How the CUDA index kernels walk their operands (kernels/cuda/index_plan.h),
// checked on the CPU: coalescing keeps every element's offset in every
// operand, scatter_add's lines cover each index element exactly once and
// never share a target, and the CUDA scatter_add emulated line by line with
// the plan gives the CPU kernel's bits; sizes 0 and 1, stride-0 operands and
// counts past 2^31.
#include <cstring>
#include <random>
#include <set>

#include "kernels/cpu/index.h"
#include "kernels/cuda/index_plan.h"
#include "kernels/front.h"
#include "kernels/index.h"
#include "support.h"

using namespace ember;
using namespace ember::test;
namespace k = ember::kernels;
using k::View;

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
        k::cuda::coalesce(v);
        const int64_t n = before[0].numel();
        INFO("shape " << shape_str(shape));
        REQUIRE(v[0].numel() == n);
        CHECK(v[0].ndim <= before[0].ndim);
        for (int kk = 0; kk < 3; ++kk) {
            REQUIRE(v[kk].ndim == v[0].ndim);
            for (int64_t i = 0; i < n; ++i)
                CHECK(k::cuda::view_offset(v[kk], i) == k::cuda::view_offset(before[kk], i));
        }
        if (n > 0)
            for (int d = 0; d < v[0].ndim; ++d) CHECK(v[0].shape[d] > 1);  // size-1 dims dropped
    }
    // Contiguous operands become one dim; a transposed one keeps two.
    View c[2] = {make({2, 3, 4}, {12, 4, 1}), make({2, 3, 4}, {0, 0, 0})};
    k::cuda::coalesce(c);
    CHECK((c[0].ndim == 1 && c[0].shape[0] == 24 && c[1].strides[0] == 0));
    View t[1] = {make({3, 1, 5}, {1, 7, 3})};
    k::cuda::coalesce(t);
    CHECK((t[0].ndim == 2 && t[0].shape[0] == 3 && t[0].shape[1] == 5));
    // A single element: no dims, offset 0.
    View one[1] = {make({1, 1}, {5, 9})};
    k::cuda::coalesce(one);
    CHECK(one[0].ndim == 0);
    CHECK(k::cuda::view_offset(one[0], 0) == 0);
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
        const k::cuda::ScatterLines s = k::cuda::scatter_lines(self, index, src, dim);
        INFO("index " << shape_str(ishape) << " dim " << dim);
        REQUIRE(s.lines * s.len == index.numel());
        CHECK(s.len == ishape[size_t(dim)]);
        // Every (line, k) names the index and src elements of one position q
        // of index's shape, and each q is named once.
        std::multiset<std::pair<int64_t, int64_t>> got, want;
        std::set<int64_t> line_starts;
        for (int64_t l = 0; l < s.lines; ++l) {
            line_starts.insert(k::cuda::view_offset(s.self, l));
            for (int64_t kk = 0; kk < s.len; ++kk)
                got.insert({k::cuda::view_offset(s.index, l) + kk * s.index_step,
                            k::cuda::view_offset(s.src, l) + kk * s.src_step});
        }
        for (int64_t q = 0; q < index.numel(); ++q)
            want.insert({k::cuda::view_offset(index, q), k::cuda::view_offset(src, q)});
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
    const k::cuda::ScatterLines s = k::cuda::scatter_lines(self, index, index, 1);
    CHECK(s.lines == a * b);
    CHECK(s.lines > (int64_t(1) << 31));
    CHECK(s.self_step == b);
    const int64_t last = s.lines - 1;
    CHECK(k::cuda::view_offset(s.self, last) == (a - 1) * 5 * b + (b - 1));
    CHECK(k::cuda::view_offset(s.index, last) == (a - 1) * 3 * b + (b - 1));
}

namespace {

// index.cu's scatter_add_kernel, line by line on the host (f32, i64 index).
void emulate_scatter_add(const View& self, const View& index, const View& src, int dim) {
    const k::cuda::ScatterLines s = k::cuda::scatter_lines(self, index, src, dim);
    float* o = self.ptr<float>();
    const int64_t* ix = index.ptr<const int64_t>();
    const float* r = src.ptr<const float>();
    for (int64_t l = 0; l < s.lines; ++l) {
        const int64_t i0 = k::cuda::view_offset(s.index, l), o0 = k::cuda::view_offset(s.self, l),
                      r0 = k::cuda::view_offset(s.src, l);
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
            const Tensor want = k::scatter_add(self0, c.dim, index, src);
            Tensor got = self0.contiguous();
            if (transposed) got = non_contiguous(got);
            emulate_scatter_add(k::view_of(got), k::view_of(index), k::view_of(src), c.dim);
            const std::vector<float> a = got.contiguous().to_vector<float>(),
                                     b = want.contiguous().to_vector<float>();
            CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
        }
}
