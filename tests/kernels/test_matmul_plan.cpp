// The mapping of row-major products onto column-major cuBLAS
// (kernels/cuda/matmul_plan.h), checked on the CPU: each plan is run through a
// model of cublasGemmStridedBatchedEx — its column-major semantics and its
// argument rules (ld >= the stored rows, >= 1) — on host buffers, and must
// give the naive product of the views, writing each output element exactly
// once and nothing else. Random shapes (sizes 1 and odd), transposed,
// padded, interleaved and broadcast operands, accumulation, and the calls
// each batch layout takes (one strided batch, a loop, one tall GEMM).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cuda/matmul_plan.h"

using namespace ember::kernels;
using namespace ember::kernels::cuda;

namespace {

// A host tensor: a buffer of doubles and a view into it.
struct Host {
    std::vector<double> buf;
    View v;
};

// A view of `shape` whose dims lie in memory in `order` (innermost first),
// each padded by pad[d] elements, batch dims in `broadcast` with stride 0.
Host make(const std::vector<int64_t>& shape, const std::vector<int>& order,
          const std::vector<int64_t>& pad, const std::vector<bool>& broadcast, std::mt19937& rng) {
    Host h;
    h.v.dtype = ember::DType::f64;
    h.v.ndim = int(shape.size());
    int64_t running = 1;
    for (int d : order) {
        h.v.shape[d] = shape[size_t(d)];
        if (broadcast[size_t(d)]) {
            h.v.strides[d] = 0;
            continue;
        }
        h.v.strides[d] = running;
        running *= shape[size_t(d)] + pad[size_t(d)];
    }
    h.buf.resize(size_t(running));
    std::uniform_int_distribution<int> value(-4, 4);
    for (double& x : h.buf) x = value(rng);
    h.v.data = reinterpret_cast<char*>(h.buf.data());
    return h;
}

// Element offset of the multi-index idx in v.
int64_t offset(const View& v, const std::vector<int64_t>& idx) {
    int64_t o = 0;
    for (int d = 0; d < v.ndim; ++d) o += idx[size_t(d)] * v.strides[d];
    return o;
}

// out (=|+=) a · b, row-major semantics, by the definition.
void reference(Host& out, const Host& a, const Host& b, bool accumulate) {
    const View& o = out.v;
    const int nd = o.ndim;
    const int64_t k = a.v.shape[nd - 1];
    std::vector<int64_t> idx(size_t(nd), 0);
    const int64_t total = o.numel();
    for (int64_t flat = 0; flat < total; ++flat) {
        int64_t r = flat;
        for (int d = nd - 1; d >= 0; --d) {
            idx[size_t(d)] = r % o.shape[d];
            r /= o.shape[d];
        }
        std::vector<int64_t> ia = idx, ib = idx;
        double s = 0;
        for (int64_t l = 0; l < k; ++l) {
            ia[size_t(nd - 1)] = l;
            ib[size_t(nd - 2)] = l;
            s += a.buf[size_t(offset(a.v, ia))] * b.buf[size_t(offset(b.v, ib))];
        }
        double& c = out.buf[size_t(offset(o, idx))];
        c = accumulate ? c + s : s;
    }
}

// cublasGemmStridedBatchedEx as documented, with its argument checks: C[b] =
// op(X[b]) · op(Y[b]) (+ C[b]), all column-major. Counts writes per element.
void model_cublas(const GemmPlan& p, GemmOffsets o, const Host& a, const Host& b, Host& out,
                  std::vector<int>& writes) {
    const int64_t rows_x = p.x.transpose ? p.k : p.m;  // X is stored [rows_x, .]
    const int64_t rows_y = p.y.transpose ? p.n : p.k;
    REQUIRE(p.m >= 1);
    REQUIRE(p.n >= 1);
    REQUIRE(p.k >= 1);
    REQUIRE(p.batch >= 1);
    REQUIRE(p.x.ld >= std::max<int64_t>(1, rows_x));
    REQUIRE(p.y.ld >= std::max<int64_t>(1, rows_y));
    REQUIRE(p.ldc >= std::max<int64_t>(1, p.m));
    for (int64_t bi = 0; bi < p.batch; ++bi) {
        const int64_t xo = o.b + bi * p.stride_x, yo = o.a + bi * p.stride_y,
                      co = o.c + bi * p.stride_c;
        for (int64_t i = 0; i < p.m; ++i)
            for (int64_t j = 0; j < p.n; ++j) {
                double s = 0;
                for (int64_t l = 0; l < p.k; ++l) {
                    const int64_t xe = p.x.transpose ? l + i * p.x.ld : i + l * p.x.ld;
                    const int64_t ye = p.y.transpose ? j + l * p.y.ld : l + j * p.y.ld;
                    s += b.buf.at(size_t(xo + xe)) * a.buf.at(size_t(yo + ye));
                }
                const size_t ce = size_t(co + i + j * p.ldc);
                double& c = out.buf.at(ce);
                c = p.accumulate ? c + s : s;
                ++writes.at(ce);
            }
    }
}

void run_plan(const GemmPlan& p, const Host& a, const Host& b, Host& out) {
    std::vector<int> writes(out.buf.size(), 0);
    for (int64_t i = 0; i < p.calls(); ++i) model_cublas(p, call_offsets(p, i), a, b, out, writes);
    // Every element of out's view written once, padding never.
    std::vector<int> expected(out.buf.size(), 0);
    const View& o = out.v;
    std::vector<int64_t> idx(size_t(o.ndim), 0);
    for (int64_t flat = 0; flat < o.numel(); ++flat) {
        int64_t r = flat;
        for (int d = o.ndim - 1; d >= 0; --d) {
            idx[size_t(d)] = r % o.shape[d];
            r /= o.shape[d];
        }
        ++expected[size_t(offset(o, idx))];
    }
    CHECK(writes == expected);
}

// The three operands of one case, made by the caller's layout choices.
struct Case {
    Host out, a, b;
};

void check_case(Case& c, bool accumulate) {
    Host want = c.out;
    want.v.data = reinterpret_cast<char*>(want.buf.data());
    reference(want, c.a, c.b, accumulate);
    const GemmPlan p = plan_gemm(c.out.v, c.a.v, c.b.v, accumulate);
    run_plan(p, c.a, c.b, c.out);
    CHECK(c.out.buf == want.buf);
}

// Dims of an operand [batch..., rows, cols] laid out with the inner matrix
// dim first (cols when row-major, rows when not), the rest in random order.
std::vector<int> random_order(int nd, bool row_major, std::mt19937& rng) {
    std::vector<int> rest;
    for (int d = 0; d < nd; ++d)
        if (d != (row_major ? nd - 1 : nd - 2)) rest.push_back(d);
    std::shuffle(rest.begin(), rest.end(), rng);
    rest.insert(rest.begin(), row_major ? nd - 1 : nd - 2);
    return rest;
}

}  // namespace

TEST_CASE("blas_matrix describes a matrix to cuBLAS or refuses it", "[matmul][plan]") {
    auto is = [](std::optional<BlasMatrix> m, bool transpose, int64_t ld) {
        return m && m->transpose == transpose && m->ld == ld;
    };
    // Row-major [3, 4]: cuBLAS sees its transpose [4, 3] as X itself (op N).
    CHECK(is(blas_matrix(3, 4, 4, 1), false, 4));
    CHECK(is(blas_matrix(3, 4, 9, 1), false, 9));  // padded rows
    // Column-major (a transposed view): op T of X = [3, 4], ld 3 or more.
    CHECK(is(blas_matrix(3, 4, 1, 3), true, 3));
    CHECK(is(blas_matrix(3, 4, 1, 8), true, 8));
    // A dim of 1 makes ld irrelevant; cuBLAS still wants it >= the stored rows.
    CHECK(is(blas_matrix(1, 4, 0, 1), false, 4));
    CHECK(is(blas_matrix(1, 4, 77, 1), false, 4));
    CHECK(is(blas_matrix(3, 1, 1, 0), false, 1));  // a column: X is [1, 3] with ld 1
    CHECK(is(blas_matrix(3, 1, 2, 5), false, 2));  // a strided column: elements 0, 2, 4
    CHECK(is(blas_matrix(1, 4, 5, 3), true, 3));   // a strided row: op T of [1, 4], ld 3
    CHECK(is(blas_matrix(1, 1, 0, 0), false, 1));
    // No ld describes broadcast or overlapping rows/columns, or negative strides.
    CHECK_FALSE(blas_matrix(3, 1, 0, 1));
    CHECK_FALSE(blas_matrix(1, 4, 1, 0));
    CHECK_FALSE(blas_matrix(3, 4, 0, 1));
    CHECK_FALSE(blas_matrix(3, 4, 2, 1));  // rows overlap
    CHECK_FALSE(blas_matrix(3, 4, 1, 2));  // columns overlap
    CHECK_FALSE(blas_matrix(3, 4, 5, 2));  // strided both ways
    CHECK_FALSE(blas_matrix(3, 4, -4, 1));
}

TEST_CASE("plan_gemm folds batches into the fewest cuBLAS calls", "[matmul][plan]") {
    std::mt19937 rng(1);
    const std::vector<bool> none(3, false);
    SECTION("a contiguous batch is one strided-batched call") {
        Case c{make({4, 3, 5}, {2, 1, 0}, {0, 0, 0}, none, rng),
               make({4, 3, 2}, {2, 1, 0}, {0, 0, 0}, none, rng),
               make({4, 2, 5}, {2, 1, 0}, {0, 0, 0}, none, rng)};
        const GemmPlan p = plan_gemm(c.out.v, c.a.v, c.b.v, false);
        CHECK(p.calls() == 1);
        CHECK(p.batch == 4);
        CHECK((p.m == 5 && p.n == 3 && p.k == 2));
        CHECK((p.stride_y == 6 && p.stride_x == 10 && p.stride_c == 15));
        CHECK((!p.x.transpose && !p.y.transpose));
        check_case(c, false);
    }
    SECTION("x · wᵀ with w shared by the batch is one tall GEMM") {
        // a [2, 3, 4] contiguous; b = wᵀ expanded: w [5, 4] read transposed, batch stride 0.
        Case c{make({2, 3, 5}, {2, 1, 0}, {0, 0, 0}, none, rng),
               make({2, 3, 4}, {2, 1, 0}, {0, 0, 0}, none, rng),
               make({2, 4, 5}, {1, 2, 0}, {0, 0, 0}, {true, false, false}, rng)};
        const GemmPlan p = plan_gemm(c.out.v, c.a.v, c.b.v, true);
        CHECK(p.calls() == 1);
        CHECK(p.batch == 1);
        CHECK((p.m == 5 && p.n == 6 && p.k == 4));
        CHECK(p.x.transpose);
        CHECK(p.x.ld == 4);
        check_case(c, true);
    }
    SECTION("a batch dim broadcast outside a real one is a loop of batched calls") {
        // a broadcast over dim 0, real over dim 1: offsets i1 * s do not fold with dim 0.
        Case c{make({3, 2, 4, 5}, {3, 2, 1, 0}, {0, 0, 0, 0}, {false, false, false, false}, rng),
               make({3, 2, 4, 6}, {3, 2, 1, 0}, {0, 0, 0, 0}, {true, false, false, false}, rng),
               make({3, 2, 6, 5}, {3, 2, 1, 0}, {0, 0, 0, 0}, {false, false, false, false}, rng)};
        const GemmPlan p = plan_gemm(c.out.v, c.a.v, c.b.v, false);
        CHECK(p.calls() == 3);
        CHECK(p.batch == 2);
        CHECK(p.stride_y == 24);
        check_case(c, false);
    }
    SECTION("a broadcast left operand folds with stride 0") {
        Case c{make({3, 2, 4}, {2, 1, 0}, {0, 0, 0}, none, rng),
               make({3, 2, 5}, {2, 1, 0}, {0, 0, 0}, {true, false, false}, rng),
               make({3, 5, 4}, {2, 1, 0}, {0, 0, 0}, none, rng)};
        const GemmPlan p = plan_gemm(c.out.v, c.a.v, c.b.v, false);
        CHECK(p.calls() == 1);
        CHECK(p.batch == 3);
        CHECK(p.stride_y == 0);
        check_case(c, false);
    }
    SECTION("batch dims in the wrong order in memory are a loop") {
        // b's batch dims swapped in memory: [2, 3] with strides [k*n, 2*k*n].
        Case c{make({2, 3, 4, 5}, {3, 2, 1, 0}, {0, 0, 0, 0}, {false, false, false, false}, rng),
               make({2, 3, 4, 6}, {3, 2, 1, 0}, {0, 0, 0, 0}, {false, false, false, false}, rng),
               make({2, 3, 6, 5}, {3, 2, 0, 1}, {0, 0, 0, 0}, {false, false, false, false}, rng)};
        const GemmPlan p = plan_gemm(c.out.v, c.a.v, c.b.v, false);
        CHECK(p.calls() == 2);
        CHECK(p.batch == 3);
        check_case(c, false);
    }
}

TEST_CASE("plan_gemm on a model of cuBLAS equals the product", "[matmul][plan]") {
    std::mt19937 rng(2024);
    const int64_t sizes[] = {1, 2, 3, 5, 7};
    std::uniform_int_distribution<int> pick(0, 4), coin(0, 1), nbatch(0, 3), bsize(1, 3);
    int checked = 0, batched = 0, looped = 0, tall = 0;
    for (int trial = 0; trial < 3000; ++trial) {
        const int nb = nbatch(rng), nd = nb + 2;
        std::vector<int64_t> batch(static_cast<size_t>(nb), 1);
        for (int64_t& s : batch) s = bsize(rng);
        const int64_t m = sizes[pick(rng)], n = sizes[pick(rng)], k = sizes[pick(rng)];
        auto shape = [&](int64_t r, int64_t cl) {
            std::vector<int64_t> s = batch;
            s.push_back(r);
            s.push_back(cl);
            return s;
        };
        auto pads = [&] {
            std::vector<int64_t> p(static_cast<size_t>(nd), 0);
            for (int64_t& x : p) x = coin(rng) && coin(rng) ? 1 : 0;
            return p;
        };
        auto bcast = [&] {
            std::vector<bool> b(static_cast<size_t>(nd), false);
            for (int d = 0; d < nb; ++d) b[size_t(d)] = coin(rng) && coin(rng);
            return b;
        };
        const bool ar = coin(rng), br = coin(rng);
        std::vector<int64_t> out_pad = pads();
        out_pad[size_t(nd - 1)] = 0;  // out's columns stay dense (rows may be padded)
        Case c{make(shape(m, n), random_order(nd, true, rng), out_pad,
                    std::vector<bool>(size_t(nd)), rng),
               make(shape(m, k), random_order(nd, ar, rng), pads(), bcast(), rng),
               make(shape(k, n), random_order(nd, br, rng), pads(), bcast(), rng)};
        // Operands laid out this way are always describable to cuBLAS.
        REQUIRE(blas_matrix(m, k, c.a.v.strides[nd - 2], c.a.v.strides[nd - 1]));
        REQUIRE(blas_matrix(k, n, c.b.v.strides[nd - 2], c.b.v.strides[nd - 1]));
        const bool accumulate = coin(rng);
        INFO("trial " << trial << ": batch dims " << nb << ", m " << m << " n " << n << " k " << k
                      << (accumulate ? ", accumulate" : ""));
        const GemmPlan p = plan_gemm(c.out.v, c.a.v, c.b.v, accumulate);
        batched += p.batch > 1;
        looped += p.calls() > 1;
        tall += p.batch == 1 && p.calls() == 1 && p.n > m;
        check_case(c, accumulate);
        ++checked;
    }
    CHECK(checked == 3000);
    // The random layouts reach every way of running a batch.
    CHECK(batched > 100);
    CHECK(looped > 100);
    CHECK(tall > 50);
}
