// CUDA index ops beyond the op table. The comparisons with the CPU on random
// inputs (index_select, gather, scatter_add, index_add and their in-place
// forms and embedding: every dtype, i32 and i64 indices, strided and
// expanded operands, size-0 and size-1 dims, the sorted scatter_add path)
// come from the op table (tests/ops/entries_index.cpp), run by
// test_cuda_ops.cpp bit for bit. Here: that the table's index_add cases do
// take the sorted path (Note [Sorted scatter_add]), bad indices as Errors
// naming the op at the next synchronization (an empty gather's check and
// the sorted path's too), and embedding's gradient on the device, through
// the sorted path with skewed tokens as well, bit for bit and alike run to run.
#include <cstring>

#include "kernels/cuda/index_plan.h"
#include "kernels/index.h"
#include "ops/op_table.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const Device kGpu = Device::cuda(0);

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

TEST_CASE("cuda index: a bad index is an Error naming the op at the next sync", "[cuda][index]") {
    const Tensor input = gpu(random_tensor({4, 6}, DType::f32, 1));
    std::vector<int64_t> v = {0, 3, 1, 2, 3, 0};
    v[4] = 6;
    const Tensor bad = gpu(from_vector(v, {6}));
    std::string msg = error_of([&] { (void)host(kernels::index_select(input, 1, bad)); });
    INFO(msg);
    CHECK(msg.find("index_select: index 6 at position 4 is out of range [0, 6)") !=
          std::string::npos);

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
    const Tensor self = random_tensor({3, 4}, DType::f32, 2),
                 src = random_tensor({2, 4}, DType::f32, 3);
    std::vector<int64_t> s = {0, 2, 1, 1, 2, 7, 0, 1};
    Tensor dself = gpu(self);
    msg = error_of([&] {
        kernels::scatter_add_(dself, 0, gpu(from_vector(s, {2, 4})), gpu(src));
        synchronize(kGpu);
    });
    CHECK(msg.find("scatter_add: index 7 at position 5 is out of range [0, 3)") !=
          std::string::npos);
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

TEST_CASE("cuda index: the op table's index_add cases take the sorted scatter_add path",
          "[cuda][index]") {
    // index_add along each dim, a self dim of 1 (one run of every element),
    // lines just under the threshold: compared with the CPU by
    // test_cuda_ops.cpp from the cuda_cases of index_add and index_add_
    // (tests/ops/entries_index.cpp), every dtype and layout.
    struct Sorted {
        Shape self;
        int64_t dim, len;
    };
    const Sorted want[] = {{{1000, 64}, 0, 20000},
                           {{37, 300}, 1, 5000},
                           {{6, 50, 5}, 1, 999},
                           {{333}, 0, 100000},
                           {{1}, 0, 64},
                           {{1, 7}, 0, 65},
                           {{5, kernels::cuda::kSortedMaxLines - 1}, 0, 64}};
    for (const char* name : {"index_add", "index_add_"}) {
        const OpEntry* entry = nullptr;
        for (const OpEntry* e : entries(Family::index))
            if (e->name == name) entry = e;
        REQUIRE(entry != nullptr);
        for (const Sorted& w : want) {
            INFO(name << ": self " << shape_str(w.self) << " dim " << w.dim << " len " << w.len);
            REQUIRE(takes_sorted_path(w.self, w.dim, w.len));
            bool found = false;
            for (const Case& c : entry->cuda_cases)
                found |= c.shapes[0] == w.self && c.args.dims == Shape{w.dim} &&
                         c.shapes[2][size_t(w.dim)] == w.len;
            CHECK(found);
        }
    }
}

TEST_CASE("cuda index: embedding's gradient on the sorted path is the CPU's bit for bit, every run",
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
    CHECK(msg.find("index_add: index 50 at position 77 is out of range [0, 50)") !=
          std::string::npos);
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
    CHECK(msg.find("index_add: index -3 at position 64 is out of range [0, 8)") !=
          std::string::npos);
    CHECK_NOTHROW(synchronize(kGpu));  // reported once; the device is usable
}
