// Datasets: TensorDataset against the tensors it reads (every dtype, strided
// and broadcast layouts, zero-copy), SyntheticDataset against its documented
// Philox formula, Fashion-MNIST (counts, classes, pixels, EMBER_DATA, bad
// files) and MmapDataset against the same data read in memory.
#include <filesystem>

#include "core/philox.h"
#include "data/idx.h"
#include "data/mmap_dataset.h"
#include "data/random.h"
#include "support/data_support.h"

using namespace ember;
using namespace ember::test;
using namespace ember::data;

namespace {

// Sample i of `inputs` through read(), compared with f64 values of inputs[i] * scale.
void check_samples(const Dataset& ds, const Tensor& inputs, const Tensor& labels, double scale) {
    REQUIRE(ds.size() == inputs.size(0));
    std::vector<float> buf(size_t(ds.sample_numel()));
    for (int64_t i = 0; i < ds.size(); ++i) {
        const int64_t label = ds.read(i, buf.data());
        CHECK(label == int64_t(labels.at({i})));
        const std::vector<double> want = values(inputs.select(0, i).contiguous());
        for (size_t j = 0; j < want.size(); ++j)
            CHECK(buf[j] == Approx(want[j] * scale).epsilon(1e-6));
    }
}

}  // namespace

TEST_CASE("TensorDataset reads every dtype and layout in place", "[data][dataset]") {
    for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64,
                     DType::u8, DType::boolean}) {
        INFO(dtype_name(dt));
        const Tensor x = random_tensor({5, 3, 4}, dt, 11, -3, 40);
        const Tensor y = random_tensor({5}, DType::i64, 12, 0, 10);
        TensorDataset ds(x, y);
        CHECK(ds.sample_shape() == Shape{3, 4});
        CHECK(ds.bytes_per_sample() == 12 * dtype_size(dt) + 8);
        check_samples(ds, x, y, 1.0);
        const Tensor xs = non_contiguous(x);
        REQUIRE_FALSE(xs.is_contiguous());
        check_samples(TensorDataset(xs, y, {.scale = 0.5}), xs, y, 0.5);
    }
    // Label dtypes, a permuted batch through read_batch, and a broadcast input.
    const Tensor x = random_tensor({6, 2}, DType::f32, 13);
    for (DType lt : {DType::i32, DType::u8}) {
        const Tensor y = random_tensor({6}, lt, 14, 0, 200);
        TensorDataset ds(x, y);
        const int64_t idx[3] = {5, 0, 3};
        float in[6];
        int64_t lab[3];
        ds.read_batch(idx, 3, in, lab);
        for (int k = 0; k < 3; ++k) {
            CHECK(lab[k] == int64_t(y.at({idx[k]})));
            CHECK(in[2 * k] == float(x.at({idx[k], 0})));
            CHECK(in[2 * k + 1] == float(x.at({idx[k], 1})));
        }
    }
    const Tensor row = random_tensor({1, 3}, DType::f32, 15);
    check_samples(TensorDataset(row.expand({4, 3}), zeros({4}, {DType::i64})), row.expand({4, 3}),
                  zeros({4}, {DType::i64}), 1.0);
    // 1-d inputs: each sample is a scalar.
    const Tensor v = random_tensor({4}, DType::f32, 16);
    TensorDataset scalars(v, zeros({4}, {DType::i64}));
    CHECK(scalars.sample_shape() == Shape{});
    CHECK(scalars.get(2).input.item() == v.at({2}));
}

TEST_CASE("TensorDataset shares its tensors and checks its arguments", "[data][dataset]") {
    Tensor x = zeros({3, 2});
    const Tensor y = zeros({3}, {DType::i64});
    TensorDataset ds(x, y);
    x.set({1, 1}, 7.0);  // written after construction: seen, nothing was copied
    const Example e = ds.get(1);
    CHECK(e.input.shape() == Shape{2});
    CHECK(e.input.at({1}) == 7.0);
    REQUIRE_THROWS_WITH_MSG(ds.get(3),
                            "Dataset::get: index 3 is out of range for a dataset of 3 samples");
    float buf[2];
    REQUIRE_THROWS_WITH_MSG(ds.read(-1, buf), "TensorDataset: index -1 is out of range");
    REQUIRE_THROWS_WITH_MSG(TensorDataset(x, zeros({2}, {DType::i64})),
                            "labels [2] must be [N] for inputs [3, 2]");
    REQUIRE_THROWS_WITH_MSG(TensorDataset(x, zeros({3, 1}, {DType::i64})),
                            "labels [3, 1] must be [N]");
    REQUIRE_THROWS_WITH_MSG(TensorDataset(x, zeros({3})),
                            "labels must have an integer dtype (i64, i32, u8), got f32");
    REQUIRE_THROWS_WITH_MSG(TensorDataset(zeros({}), zeros({1}, {DType::i64})),
                            "inputs [] must have 1 to 9 dims");
    REQUIRE_THROWS_WITH_MSG(TensorDataset(Tensor(), y), "undefined tensor");
}

TEST_CASE("SyntheticDataset follows its Philox formula", "[data][dataset]") {
    const Shape shape{2, 3, 3};  // 18 values: 5 blocks, the last one partly used
    SyntheticDataset ds(50, shape, 7, 99);
    CHECK(ds.size() == 50);
    CHECK(ds.bytes_per_sample() == 0);
    std::vector<float> got(18);
    std::vector<int64_t> counts(7);
    for (int64_t i = 0; i < 50; ++i) {
        const int64_t label = ds.read(i, got.data());
        const uint64_t c = uint64_t(label);
        CHECK(label ==
              int64_t((uint64_t(philox_block(99, uint64_t(i), kSyntheticStream).x[0]) * 7) >> 32));
        ++counts[size_t(label)];
        for (int64_t j = 0; j < 18; ++j) {
            const uint32_t pw =
                philox_block(99, c * 5 + uint64_t(j / 4), kSyntheticStream | 2).x[j % 4];
            const uint32_t nw =
                philox_block(99, uint64_t(i) * 5 + uint64_t(j / 4), kSyntheticStream | 1).x[j % 4];
            const double want =
                0.5 * double(pw >> 8) / 16777216.0 + 0.5 * double(nw >> 8) / 16777216.0;
            CHECK(got[size_t(j)] == Approx(want).margin(1e-7));
        }
    }
    for (int64_t c : counts) CHECK(c > 0);
    // Same seed, same samples; another seed, others.
    std::vector<float> again(18), other(18);
    CHECK(SyntheticDataset(50, shape, 7, 99).read(3, again.data()) == ds.read(3, got.data()));
    CHECK(again == got);
    SyntheticDataset(50, shape, 7, 100).read(3, other.data());
    CHECK(other != got);
    REQUIRE_THROWS_WITH_MSG(SyntheticDataset(-1, shape, 2), "size must be >= 0, got -1");
    REQUIRE_THROWS_WITH_MSG(SyntheticDataset(1, shape, 0),
                            "num_classes must be in [1, 2^32], got 0");
    REQUIRE_THROWS_WITH_MSG(ds.read(50, got.data()), "SyntheticDataset: index 50 is out of range");
}

TEST_CASE("FashionMNIST: the test split, pixel for pixel", "[data][dataset][fashion]") {
    const std::string root = fashion_root();
    const auto ds = fashion_test();
    CHECK(ds->size() == 10000);
    CHECK(ds->sample_shape() == Shape{1, 28, 28});
    CHECK(ds->bytes_per_sample() == 785);
    CHECK(ds->root() == root);
    const Tensor raw = read_idx(root + "/t10k-images-idx3-ubyte.gz");
    const Tensor lab = read_idx(root + "/t10k-labels-idx1-ubyte.gz");
    std::vector<int64_t> counts(10);
    std::vector<float> buf(784);
    const uint8_t* px = raw.data<uint8_t>();
    for (int64_t i = 0; i < 10000; ++i) {
        const int64_t label = ds->read(i, buf.data());
        REQUIRE(label == lab.data<uint8_t>()[i]);
        ++counts[size_t(label)];
        if (i % 97 == 0)  // every pixel of a sample of the images
            for (int j = 0; j < 784; ++j)
                REQUIRE(buf[size_t(j)] == Approx(px[i * 784 + j] / 255.0).epsilon(1e-6));
    }
    for (int64_t c : counts) CHECK(c == 1000);  // the test split is balanced
    CHECK(std::string(FashionMNIST::class_name(0)) == "T-shirt/top");
    CHECK(std::string(FashionMNIST::class_name(9)) == "Ankle boot");
    REQUIRE_THROWS_WITH_MSG(FashionMNIST::class_name(10), "label 10 is not in [0, 10)");
}

TEST_CASE("FashionMNIST: the train split holds 60000 balanced samples",
          "[data][dataset][fashion]") {
    fashion_root();
    FashionMNIST train(Split::train);
    REQUIRE(train.size() == 60000);
    std::vector<int64_t> counts(10);
    const uint8_t* l = train.labels().data<uint8_t>();
    for (int64_t i = 0; i < 60000; ++i) ++counts[l[i]];
    for (int64_t c : counts) CHECK(c == 6000);
}

TEST_CASE("FashionMNIST: EMBER_DATA, an explicit root, and bad files", "[data][dataset]") {
    TempDir dir;
    const std::string fm = dir.file("fashion-mnist");
    std::filesystem::create_directory(fm);
    const Bytes px = random_bytes(3 * 784, 7);
    write_mnist_like(fm, "t10k", px, {4, 0, 9}, 28, 28, false);
    // A gzip pair too: the raw files win.
    write_mnist_like(fm, "t10k", random_bytes(2 * 784, 8), {1, 2}, 28, 28, true);
    {
        ScopedEnv env("EMBER_DATA", dir.path);
        CHECK(FashionMNIST::default_root() == fm);
        FashionMNIST ds(Split::test);
        CHECK(ds.size() == 3);
        CHECK(ds.get(2).label == 9);
        CHECK(ds.get(1).input.at({0, 3, 5}) == Approx(px[784 + 3 * 28 + 5] / 255.0));
        REQUIRE_THROWS_WITH_MSG(FashionMNIST(Split::train),
                                "neither " + fm + "/train-images-idx3-ubyte nor");
        REQUIRE_THROWS_WITH_MSG(FashionMNIST(Split::train),
                                "install Debian's dataset-fashion-mnist");
    }
    CHECK(FashionMNIST(Split::test, fm).size() == 3);

    const std::string bad = dir.file("bad");
    std::filesystem::create_directory(bad);
    write_mnist_like(bad, "train", random_bytes(3 * 784, 9), {1, 2}, 28, 28, false);
    write_file(bad + "/train-images-idx3-ubyte",
               concat(idx_header(0x08, {3, 28, 28}), random_bytes(3 * 784, 9)));
    REQUIRE_THROWS_WITH_MSG(
        FashionMNIST(Split::train, bad),
        "holds 3 images but " + bad + "/train-labels-idx1-ubyte holds 2 labels");
    write_mnist_like(bad, "train", random_bytes(2 * 784, 9), {1, 10}, 28, 28, false);
    REQUIRE_THROWS_WITH_MSG(FashionMNIST(Split::train, bad),
                            "label 10 of sample 1 is not in [0, 10)");
    write_mnist_like(bad, "train", random_bytes(2 * 27 * 28, 9), {1, 2}, 27, 28, false);
    REQUIRE_THROWS_WITH_MSG(FashionMNIST(Split::train, bad),
                            "holds u8 [2, 27, 28], expected u8 [N, 28, 28] images");
    write_mnist_like(bad, "train", random_bytes(2 * 784, 9), {1, 2}, 28, 28, false);
    write_file(bad + "/train-labels-idx1-ubyte", concat(idx_header(0x08, {2}), {1}));
    REQUIRE_THROWS_WITH_MSG(FashionMNIST(Split::train, bad), "truncated");
}

TEST_CASE("MmapDataset: raw files mapped, read like the same data in memory", "[data][dataset]") {
    TempDir dir;
    // f32 samples [2, 3] after an 8-byte header, i32 labels after 4 bytes.
    const Tensor x = random_tensor({5, 2, 3}, DType::f32, 21);
    const std::vector<float> xv = x.to_vector<float>();
    Bytes in(8, 0xEE), lab(4, 0xEE);
    in.insert(in.end(), reinterpret_cast<const uint8_t*>(xv.data()),
              reinterpret_cast<const uint8_t*>(xv.data() + xv.size()));
    const std::vector<int32_t> labels = {3, -1, 7, 0, 2};
    lab.insert(lab.end(), reinterpret_cast<const uint8_t*>(labels.data()),
               reinterpret_cast<const uint8_t*>(labels.data() + labels.size()));
    write_file(dir.file("x.bin"), in);
    write_file(dir.file("y.bin"), lab);
    const MmapDatasetOptions opt{.dtype = DType::f32,
                                 .inputs_offset = 8,
                                 .label_dtype = DType::i32,
                                 .labels_offset = 4,
                                 .scale = 2.0};
    MmapDataset ds(dir.file("x.bin"), dir.file("y.bin"), {2, 3}, opt);
    CHECK(ds.size() == 5);
    CHECK(ds.bytes_per_sample() == 28);
    check_samples(ds, x, from_vector(labels), 2.0);

    // Errors: sizes that do not fit the layout, bad options, gzip input.
    REQUIRE_THROWS_WITH_MSG(MmapDataset(dir.file("x.bin"), dir.file("y.bin"), {4}, opt),
                            "not a whole number of f32 [4] samples (16 bytes each)");
    REQUIRE_THROWS_WITH_MSG(MmapDataset(dir.file("x.bin"), dir.file("y.bin"), {3}, opt),
                            "holds 20 bytes of labels after its 4-byte offset; 10 samples need 40");
    REQUIRE_THROWS_WITH_MSG(MmapDataset(dir.file("x.bin"), dir.file("y.bin"), {0, 3}, opt),
                            "has no elements");
    REQUIRE_THROWS_WITH_MSG(
        MmapDataset(dir.file("x.bin"), dir.file("y.bin"), {2, 3}, {.label_dtype = DType::f32}),
        "label dtype must be u8, i32 or i64, got f32");
    REQUIRE_THROWS_WITH_MSG(MmapDataset(dir.file("x.bin"), dir.file("y.bin"), {2, 3},
                                        {.dtype = DType::f32, .inputs_offset = 6}),
                            "multiples of their element sizes");
    REQUIRE_THROWS_WITH_MSG(MmapDataset(dir.file("none"), dir.file("y.bin"), {2, 3}),
                            "MmapDataset: " + dir.file("none") + ": cannot open: No such file");
    REQUIRE_THROWS_WITH_MSG(ds.read(5, nullptr), "MmapDataset: index 5 is out of range");

    // from_idx over raw IDX files equals FashionMNIST over the same bytes.
    const Bytes px = random_bytes(4 * 784, 22);
    write_mnist_like(dir.path, "t10k", px, {5, 6, 7, 8}, 28, 28, false);
    const auto mm = MmapDataset::from_idx(dir.file("t10k-images-idx3-ubyte"),
                                          dir.file("t10k-labels-idx1-ubyte"));
    FashionMNIST mem(Split::test, dir.path);
    CHECK(mm->sample_shape() == Shape{1, 28, 28});
    CHECK(mm->bytes_per_sample() == 785);
    REQUIRE(mm->size() == 4);
    std::vector<float> a(784), b(784);
    for (int64_t i = 0; i < 4; ++i) {
        CHECK(mm->read(i, a.data()) == mem.read(i, b.data()));
        CHECK(a == b);
    }
    write_mnist_like(dir.path, "gz", px, {5, 6, 7, 8}, 28, 28, true);
    REQUIRE_THROWS_WITH_MSG(MmapDataset::from_idx(dir.file("gz-images-idx3-ubyte.gz"),
                                                  dir.file("t10k-labels-idx1-ubyte")),
                            "is gzip-compressed; mapping needs the raw file");
    REQUIRE_THROWS_WITH_MSG(MmapDataset::from_idx(dir.file("t10k-images-idx3-ubyte"),
                                                  dir.file("t10k-images-idx3-ubyte")),
                            "holds labels [4, 28, 28] for images [4, 28, 28]");
}
