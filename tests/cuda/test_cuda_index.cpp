// CUDA index ops against the CPU backend, bit for bit: index_select, gather
// and embedding (every dtype, i32 and i64 indices, every dim, strided and
// expanded operands, size-0 and size-1 dims), scatter_add and index_add
// (repeated indices, where the order of the adds shows; transposed self;
// run-to-run determinism), bad indices as Errors naming the op at the next
// synchronization (an empty gather's check too), and embedding's gradient.
// The sorted scatter_add path (Note [Sorted scatter_add]): embedding's
// backward with 20000 tokens, index_add along each dim, every dtype, its
// bad-index reports, two runs alike.
#include <cstring>

#include "kernels/cuda/index_plan.h"
#include "kernels/index.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const Device kGpu = Device::cuda(0);
const DType kAll[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                      DType::i32, DType::i64, DType::u8,  DType::boolean};

Tensor gpu(const Tensor& t) { return t.to(kGpu); }
Tensor host(const Tensor& t) { return t.to(Device::cpu()); }

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

Tensor random_index(const Shape& shape, int64_t hi, DType dtype, uint64_t seed) {
    Generator g(seed);
    return randint(0, hi, shape, {dtype}, &g);
}

Tensor layout(const Tensor& t, int64_t case_no) { return case_no % 2 ? non_contiguous(t) : t; }

// Bit for bit, -0.0 against 0.0 and NaN payloads included.
bool same_bits(const Tensor& a, const Tensor& b) {
    const Tensor x = host(a).contiguous(), y = host(b).contiguous();
    return x.shape() == y.shape() && x.dtype() == y.dtype() &&
           std::memcmp(x.data_ptr(), y.data_ptr(), size_t(x.numel()) * dtype_size(x.dtype())) == 0;
}

// Whether index_add(self, dim, index [len], source) takes the sorted path.
bool takes_sorted_path(const Shape& self, int64_t dim, int64_t len) {
    kernels::View s, i, r;
    s.ndim = i.ndim = r.ndim = int(self.size());
    int64_t step = 1;
    for (int d = s.ndim - 1; d >= 0; --d) {
        s.shape[d] = self[size_t(d)];
        s.strides[d] = step;
        step *= self[size_t(d)];
    }
    step = 1;
    for (int d = s.ndim - 1; d >= 0; --d) {
        r.shape[d] = i.shape[d] = d == dim ? len : self[size_t(d)];
        r.strides[d] = step;
        i.strides[d] = d == dim ? 1 : 0;
        step *= r.shape[d];
    }
    const kernels::cuda::ScatterLines lines = kernels::cuda::scatter_lines(s, i, r, int(dim));
    return kernels::cuda::use_sorted_scatter(lines, self[size_t(dim)]);
}

}  // namespace

TEST_CASE("cuda index: index_select and gather equal the CPU for every dtype and dim",
          "[cuda][index]") {
    const Shape shapes[] = {{5}, {4, 3}, {2, 3, 4}, {3, 1, 5}, {2, 0, 3}, {1, 1, 1}, {3, 2, 7, 33}};
    int64_t case_no = 0;
    for (const Shape& shape : shapes)
        for (int64_t dim = 0; dim < int64_t(shape.size()); ++dim)
            for (DType dt : kAll)
                for (DType it : {DType::i64, DType::i32}) {
                    ++case_no;
                    const int64_t size = shape[size_t(dim)];
                    const Tensor input = layout(random_tensor(shape, dt, uint64_t(case_no)), case_no);
                    INFO(shape_str(shape) << " dim " << dim << " " << dtype_name(dt) << " index "
                                          << dtype_name(it));
                    // index_select: a 1-d index, strided every other case.
                    const int64_t n = size == 0 ? 0 : 1 + case_no % 9;
                    const Tensor sel = layout(
                        size == 0 ? empty({0}, {it}) : random_index({n}, size, it, case_no + 7),
                        case_no / 2);
                    check_close(host(kernels::index_select(gpu(input), dim, gpu(sel))),
                                kernels::index_select(input, dim, sel), 0, 0);
                    // gather: index as large as input except along dim (larger there).
                    if (size == 0) continue;
                    Shape ishape = shape;
                    ishape[size_t(dim)] = 1 + case_no % 5;
                    const Tensor idx =
                        layout(random_index(ishape, size, it, case_no + 11), case_no / 4);
                    check_close(host(kernels::gather(gpu(input), dim, gpu(idx))),
                                kernels::gather(input, dim, idx), 0, 0);
                }
}

TEST_CASE("cuda index: embedding equals the CPU, expanded and strided operands too",
          "[cuda][index]") {
    uint64_t seed = 1;
    for (DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64})
        for (DType it : {DType::i64, DType::i32}) {
            const Tensor weight = random_tensor({50, 33}, dt, ++seed);
            const Tensor idx = random_index({7, 13}, 50, it, ++seed);
            check_close(host(kernels::embedding(gpu(weight), gpu(idx))),
                        kernels::embedding(weight, idx), 0, 0);
            // A transposed weight, a transposed and an expanded index, a 0-d index.
            const Tensor wt = non_contiguous(weight);
            check_close(host(kernels::embedding(gpu(weight).t().contiguous().t(),
                                                gpu(non_contiguous(idx)))),
                        kernels::embedding(wt, idx), 0, 0);
            const Tensor row = random_index({1, 9}, 50, it, ++seed);
            check_close(host(kernels::embedding(gpu(weight), gpu(row).expand({4, 9}))),
                        kernels::embedding(weight, row.expand({4, 9})), 0, 0);
            const Tensor one = from_vector(std::vector<int64_t>{49}, {}).to(it);
            check_close(host(kernels::embedding(gpu(weight), gpu(one))),
                        kernels::embedding(weight, one), 0, 0);
        }
    // Many tokens: the grid-stride loop over more than one wave of blocks.
    const Tensor w = random_tensor({1000, 257}, DType::bf16, 3);
    const Tensor ids = random_index({64, 129}, 1000, DType::i64, 4);
    check_close(host(kernels::embedding(gpu(w), gpu(ids))), kernels::embedding(w, ids), 0, 0);
}

TEST_CASE("cuda index: scatter_add and index_add equal the CPU bit for bit, every run",
          "[cuda][index]") {
    struct Case {
        Shape self, index;
        int64_t dim;
    };
    // Few targets and long lines: sums of many terms, where the order shows.
    const Case cases[] = {{{5, 7}, {40, 7}, 0},      {{6, 3, 4}, {6, 30, 4}, 1}, {{9}, {200}, 0},
                          {{4, 5}, {3, 60}, 1},      {{1, 1}, {1, 1}, 0},        {{3, 8, 2}, {2, 7, 50}, 2},
                          {{2, 0, 3}, {2, 0, 3}, 0}, {{64, 300}, {5000, 300}, 0}};
    uint64_t seed = 1;
    for (const Case& c : cases)
        for (DType dt : kAll)
            for (bool strided : {false, true}) {
                INFO("self " << shape_str(c.self) << " index " << shape_str(c.index) << " dim "
                             << c.dim << " " << dtype_name(dt) << (strided ? " strided" : ""));
                const Tensor self = random_tensor(c.self, dt, ++seed, -100, 100);
                const int64_t size = c.self[size_t(c.dim)];
                const Tensor idx = layout(random_index(c.index, std::max<int64_t>(size, 1),
                                                       DType::i64, ++seed), strided);
                const Tensor src = random_tensor(c.index, dt, ++seed, -100, 100);
                if (size == 0 && idx.numel() > 0) continue;
                const Tensor want = kernels::scatter_add(self, c.dim, idx, src);
                // In place into a transposed self on the device.
                Tensor dself = gpu(self);
                if (strided) dself = non_contiguous(dself);
                kernels::scatter_add_(dself, c.dim, gpu(idx), gpu(src));
                check_close(host(dself), want, 0, 0);
                const Tensor again = kernels::scatter_add(gpu(self), c.dim, gpu(idx), gpu(src));
                check_close(host(again), want, 0, 0);
                // index_add: a 1-d index along dim, source of self's shape elsewhere.
                Shape sshape = c.self;
                sshape[size_t(c.dim)] = c.index[size_t(c.dim)];
                const Tensor source = layout(random_tensor(sshape, dt, ++seed, -100, 100), strided);
                const Tensor line = random_index({sshape[size_t(c.dim)]}, std::max<int64_t>(size, 1),
                                                 DType::i32, ++seed);
                if (size == 0 && line.numel() > 0) continue;
                check_close(host(kernels::index_add(gpu(self), c.dim, gpu(line), gpu(source))),
                            kernels::index_add(self, c.dim, line, source), 0, 0);
            }
}

TEST_CASE("cuda index: a bad index is an Error naming the op at the next sync", "[cuda][index]") {
    const Tensor input = gpu(random_tensor({4, 6}, DType::f32, 1));
    std::vector<int64_t> v = {0, 3, 1, 2, 3, 0};
    v[4] = 6;
    const Tensor bad = gpu(from_vector(v, {6}));
    std::string msg = error_of([&] { (void)host(kernels::index_select(input, 1, bad)); });
    INFO(msg);
    CHECK(msg.find("index_select: index 6 at position 4 is out of range [0, 6)") != std::string::npos);

    std::vector<int32_t> g = {0, 1, 2, 3, -2, 1, 0, 0};
    msg = error_of([&] {
        (void)kernels::gather(input, 0, gpu(from_vector(g, {2, 4})));
        synchronize(kGpu);
    });
    CHECK(msg.find("gather: index -2 at position 4 is out of range [0, 4)") != std::string::npos);

    msg = error_of([&] {
        (void)host(kernels::embedding(input, gpu(from_vector(std::vector<int64_t>{1, 4}, {2}))));
    });
    CHECK(msg.find("embedding: index 4 at position 1 is out of range [0, 4)") != std::string::npos);

    // An empty output still checks its indices (input [0, 6]: out [0, 2]).
    const Tensor empty_in = gpu(zeros({0, 6}));
    msg = error_of([&] {
        (void)host(
            kernels::index_select(empty_in, 1, gpu(from_vector(std::vector<int64_t>{2, 9}, {2}))));
    });
    CHECK(msg.find("index_select: index 9 at position 1") != std::string::npos);

    // scatter_add: self gets every valid contribution, the bad one is skipped.
    const Tensor self = random_tensor({3, 4}, DType::f32, 2), src = random_tensor({2, 4}, DType::f32, 3);
    std::vector<int64_t> s = {0, 2, 1, 1, 2, 7, 0, 1};
    Tensor dself = gpu(self);
    msg = error_of([&] {
        kernels::scatter_add_(dself, 0, gpu(from_vector(s, {2, 4})), gpu(src));
        synchronize(kGpu);
    });
    CHECK(msg.find("scatter_add: index 7 at position 5 is out of range [0, 3)") != std::string::npos);
    std::vector<float> zeroed = src.to_vector<float>();
    zeroed[5] = 0;  // the skipped contribution
    s[5] = 0;
    check_close(host(dself),
                kernels::scatter_add(self, 0, from_vector(s, {2, 4}), from_vector(zeroed, {2, 4})),
                0, 0);

    msg = error_of([&] {
        (void)host(kernels::index_add(gpu(self), 1,
                                      gpu(from_vector(std::vector<int64_t>{0, -1}, {2})),
                                      gpu(random_tensor({3, 2}, DType::f32, 4))));
    });
    CHECK(msg.find("index_add: index -1") != std::string::npos);
    CHECK_NOTHROW(synchronize(kGpu));  // reported once; the device is usable
    check_close(
        host(kernels::gather(input, 0, gpu(from_vector(std::vector<int64_t>{3, 0}, {1, 2})))),
        kernels::gather(host(input), 0, from_vector(std::vector<int64_t>{3, 0}, {1, 2})), 0, 0);
}

TEST_CASE("cuda index: embedding's gradient on the device equals the CPU's", "[cuda][index]") {
    for (DType dt : {DType::f32, DType::bf16}) {
        const Tensor w0 = random_tensor({40, 24}, dt, 5);
        const Tensor ids = random_index({16, 33}, 40, DType::i64, 6);  // many repeats
        const Tensor g0 = random_tensor({16, 33, 24}, dt, 7);
        Tensor grads[2];
        for (int dev = 0; dev < 2; ++dev) {
            Tensor w = dev ? gpu(w0) : w0.clone();
            w.set_requires_grad(true);
            const Tensor out = embedding(w, dev ? gpu(ids) : ids);
            out.backward(dev ? gpu(g0) : g0);
            grads[dev] = host(w.grad());
        }
        INFO(dtype_name(dt));
        check_close(grads[1], grads[0], 0, 0);
    }
}

TEST_CASE("cuda index: the sorted scatter_add path equals the CPU bit for bit, every run",
          "[cuda][index]") {
    // Embedding's backward, [1000, 64] and 20000 tokens: ~20 repeats of each
    // row, then a skewed batch where half the tokens are one of 3 rows.
    REQUIRE(takes_sorted_path({1000, 64}, 0, 20000));
    for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64})
        for (bool skewed : {false, true}) {
            const Tensor w0 = random_tensor({1000, 64}, dt, 21);
            Tensor ids = random_index({100, 200}, 1000, DType::i64, 22);
            if (skewed) {
                std::vector<int64_t> v = ids.to_vector<int64_t>();
                for (size_t j = 0; j < v.size(); j += 2) v[j] = int64_t(j % 3);
                ids = from_vector(v, {100, 200});
            }
            const Tensor g0 = random_tensor({100, 200, 64}, dt, 23);
            Tensor grads[3];
            for (int run = 0; run < 3; ++run) {  // CPU, then the device twice
                Tensor w = run ? gpu(w0) : w0.clone();
                w.set_requires_grad(true);
                embedding(w, run ? gpu(ids) : ids).backward(run ? gpu(g0) : g0);
                grads[run] = host(w.grad());
            }
            INFO(dtype_name(dt) << (skewed ? " skewed" : ""));
            CHECK(same_bits(grads[1], grads[0]));
            CHECK(same_bits(grads[2], grads[1]));
        }

    // index_add along each dim, every dtype, i32 and i64 indices, strided
    // self, source and index; a self dim of 1 (one run of every element);
    // lines just under the threshold.
    struct Case {
        Shape self;
        int64_t dim, len, distinct;
    };
    const Case cases[] = {{{1000, 64}, 0, 20000, 1000}, {{37, 300}, 1, 5000, 300},
                          {{6, 50, 5}, 1, 999, 13},     {{333}, 0, 100000, 333},
                          {{1}, 0, 64, 1},              {{1, 7}, 0, 65, 1}};
    uint64_t seed = 30;
    int64_t case_no = 0;
    for (const Case& c : cases) {
        REQUIRE(takes_sorted_path(c.self, c.dim, c.len));
        for (DType dt : kAll)
            for (DType it : {DType::i64, DType::i32}) {
                ++case_no;
                INFO("self " << shape_str(c.self) << " dim " << c.dim << " len " << c.len << " "
                             << dtype_name(dt) << " index " << dtype_name(it));
                const Tensor self = random_tensor(c.self, dt, ++seed, -100, 100);
                Shape sshape = c.self;
                sshape[size_t(c.dim)] = c.len;
                const Tensor source = layout(random_tensor(sshape, dt, ++seed, -100, 100), case_no);
                const Tensor index =
                    layout(random_index({c.len}, c.distinct, it, ++seed), case_no / 2);
                const Tensor want = kernels::index_add(self, c.dim, index, source);
                Tensor dself = layout(gpu(self), case_no / 4);
                kernels::index_add_(dself, c.dim, gpu(index), gpu(source));
                CHECK(same_bits(dself, want));
                const Tensor again = kernels::index_add(gpu(self), c.dim, gpu(index), gpu(source));
                CHECK(same_bits(again, want));
            }
    }
    const Shape wide = {5, kernels::cuda::kSortedMaxLines - 1};
    REQUIRE(takes_sorted_path(wide, 0, 64));
    const Tensor self = random_tensor(wide, DType::f32, 41, -100, 100);
    const Tensor source = random_tensor({64, wide[1]}, DType::f32, 42, -100, 100);
    const Tensor index = random_index({64}, 5, DType::i64, 43);
    CHECK(same_bits(kernels::index_add(gpu(self), 0, gpu(index), gpu(source)),
                    kernels::index_add(self, 0, index, source)));
}

TEST_CASE("cuda index: a bad index on the sorted path is reported as on the line path",
          "[cuda][index]") {
    REQUIRE(takes_sorted_path({50, 8}, 0, 100));
    const Tensor self = random_tensor({50, 8}, DType::f32, 51);
    const Tensor source = random_tensor({100, 8}, DType::f32, 52);
    std::vector<int64_t> v = random_index({100}, 50, DType::i64, 53).to_vector<int64_t>();
    v[77] = 50;
    Tensor dself = gpu(self);
    std::string msg = error_of([&] {
        kernels::index_add_(dself, 0, gpu(from_vector(v, {100})), gpu(source));
        synchronize(kGpu);
    });
    INFO(msg);
    CHECK(msg.find("index_add: index 50 at position 77 is out of range [0, 50)") != std::string::npos);
    // self holds every valid contribution: as if row 77 of source were zeros.
    std::vector<float> zeroed = source.to_vector<float>();
    for (int j = 0; j < 8; ++j) zeroed[size_t(77 * 8 + j)] = 0;
    v[77] = 0;
    CHECK(same_bits(
        dself, kernels::index_add(self, 0, from_vector(v, {100}), from_vector(zeroed, {100, 8}))));

    // A negative one, an i32 index, along dim 1.
    std::vector<int32_t> w(300);
    for (size_t j = 0; j < w.size(); ++j) w[j] = int32_t(j % 8);
    w[64] = -3;
    REQUIRE(takes_sorted_path({4, 8}, 1, 300));
    msg = error_of([&] {
        (void)host(kernels::index_add(gpu(random_tensor({4, 8}, DType::bf16, 54)), 1,
                                      gpu(from_vector(w, {300})),
                                      gpu(random_tensor({4, 300}, DType::bf16, 55))));
    });
    CHECK(msg.find("index_add: index -3 at position 64 is out of range [0, 8)") != std::string::npos);
    CHECK_NOTHROW(synchronize(kGpu));  // reported once; the device is usable
}
