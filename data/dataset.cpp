// The Dataset defaults, TensorDataset (a strided, converting gather from host
// tensors in place) and SyntheticDataset (Philox-generated samples).
#include "data/dataset.h"

#include <algorithm>

#include "core/error.h"
#include "data/random.h"

namespace ember::data {

void Dataset::check_index(int64_t i, const char* op) const {
    EMBER_CHECK(i >= 0 && i < size(), op, ": index ", i, " is out of range for a dataset of ",
                size(), " samples");
}

void Dataset::read_batch(const int64_t* indices, int64_t count, float* inputs,
                         int64_t* labels) const {
    const int64_t numel = sample_numel();
    for (int64_t k = 0; k < count; ++k) labels[k] = read(indices[k], inputs + k * numel);
}

void Dataset::read_tokens(int64_t, int64_t*, int64_t*) const {
    EMBER_FAIL("Dataset: read_tokens on a dataset of classification samples (images and labels)");
}

Example Dataset::get(int64_t i) const {
    check_index(i, "Dataset::get");
    Tensor input = empty(sample_shape());
    const int64_t label = read(i, input.data<float>());
    return {input, label};
}

// ---- TensorDataset -------------------------------------------------------------

namespace {

// Sample dims a TensorDataset walks with its fixed-size index (no allocation per read).
constexpr int kMaxSampleDims = 8;

// One sample of sample_dims dims at `base`, converted to f32 and scaled, into
// out (row-major). The contiguous case is one flat loop.
template <class T>
void gather(const T* base, const int64_t* sizes, const int64_t* strides, int nd, bool contiguous,
            int64_t numel, float scale, float* out) {
    if (contiguous) {
        for (int64_t j = 0; j < numel; ++j) out[j] = static_cast<float>(base[j]) * scale;
        return;
    }
    // Odometer over all but the last dim; the last dim is a strided inner loop.
    int64_t idx[kMaxSampleDims] = {};
    const int64_t inner = nd > 0 ? sizes[nd - 1] : 1, inner_stride = nd > 0 ? strides[nd - 1] : 0;
    for (int64_t done = 0; done < numel; done += inner) {
        int64_t off = 0;
        for (int d = 0; d + 1 < nd; ++d) off += idx[d] * strides[d];
        const T* p = base + off;
        for (int64_t j = 0; j < inner; ++j)
            out[done + j] = static_cast<float>(p[j * inner_stride]) * scale;
        for (int d = nd - 2; d >= 0; --d) {
            if (++idx[d] < sizes[d]) break;
            idx[d] = 0;
        }
    }
}

}  // namespace

TensorDataset::TensorDataset(Tensor inputs, Tensor labels, TensorDatasetOptions options)
    : inputs_(std::move(inputs)), labels_(std::move(labels)), scale_(float(options.scale)) {
    EMBER_CHECK(inputs_.defined() && labels_.defined(), "TensorDataset: undefined tensor");
    EMBER_CHECK(inputs_.device().is_cpu() && labels_.device().is_cpu(), "TensorDataset: inputs on ",
                inputs_.device(), " and labels on ", labels_.device(),
                ": datasets read host memory (the loader moves batches to the device)");
    EMBER_CHECK(inputs_.dim() >= 1 && inputs_.dim() <= kMaxSampleDims + 1, "TensorDataset: inputs ",
                shape_str(inputs_.shape()), " must have 1 to ", kMaxSampleDims + 1,
                " dims (samples along dim 0)");
    EMBER_CHECK(labels_.dim() == 1 && labels_.size(0) == inputs_.size(0), "TensorDataset: labels ",
                shape_str(labels_.shape()), " must be [N] for inputs ", shape_str(inputs_.shape()));
    EMBER_CHECK(labels_.dtype() == DType::i64 || labels_.dtype() == DType::i32 ||
                    labels_.dtype() == DType::u8,
                "TensorDataset: labels must have an integer dtype (i64, i32, u8), got ",
                dtype_name(labels_.dtype()));
    sample_shape_.assign(inputs_.shape().begin() + 1, inputs_.shape().end());
}

int64_t TensorDataset::label_at(int64_t i) const {
    const int64_t off = i * labels_.stride(0);
    switch (labels_.dtype()) {
        case DType::i64:
            return labels_.data<int64_t>()[off];
        case DType::i32:
            return labels_.data<int32_t>()[off];
        case DType::u8:
            return labels_.data<uint8_t>()[off];
        default:
            break;
    }
    EMBER_INTERNAL_ASSERT(false);
    return 0;
}

int64_t TensorDataset::read(int64_t i, float* out) const {
    int64_t label = 0;
    read_batch(&i, 1, out, &label);
    return label;
}

void TensorDataset::read_batch(const int64_t* indices, int64_t count, float* inputs,
                               int64_t* labels) const {
    const int nd = int(inputs_.dim()) - 1;
    const int64_t* sizes = inputs_.shape().data() + 1;
    const int64_t* strides = inputs_.strides().data() + 1;
    const int64_t numel = shape_numel(sample_shape_), stride0 = inputs_.stride(0);
    // Samples are contiguous when the slice inputs_[i] is (size-1 dims aside).
    bool contiguous = true;
    for (int64_t d = nd - 1, expected = 1; d >= 0; --d) {
        if (sizes[d] != 1 && strides[d] != expected) contiguous = false;
        expected *= sizes[d];
    }
    visit_dtype(inputs_.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* base = static_cast<const T*>(inputs_.data_ptr());
        for (int64_t k = 0; k < count; ++k) {
            const int64_t i = indices[k];
            check_index(i, "TensorDataset");
            gather(base + i * stride0, sizes, strides, nd, contiguous, numel, scale_,
                   inputs + k * numel);
            labels[k] = label_at(i);
        }
    });
}

int64_t TensorDataset::bytes_per_sample() const {
    return shape_numel(sample_shape_) * inputs_.element_size() + labels_.element_size();
}

// ---- SyntheticDataset -------------------------------------------------------------

SyntheticDataset::SyntheticDataset(int64_t size, Shape sample_shape, int64_t num_classes,
                                   uint64_t seed)
    : size_(size), sample_shape_(std::move(sample_shape)), num_classes_(num_classes), seed_(seed) {
    EMBER_CHECK(size >= 0, "SyntheticDataset: size must be >= 0, got ", size);
    EMBER_CHECK(num_classes >= 1 && num_classes <= (int64_t(1) << 32),
                "SyntheticDataset: num_classes must be in [1, 2^32], got ", num_classes);
    numel_ = shape_numel(sample_shape_);
    // Sample i owns blocks [i * bps, (i + 1) * bps) of its streams: keep that in 64 bits.
    const uint64_t bps = uint64_t(numel_ + 3) / 4;
    EMBER_CHECK(bps == 0 || uint64_t(std::max(size, num_classes)) <= ~uint64_t(0) / bps,
                "SyntheticDataset: ", size, " samples of ", shape_str(sample_shape_),
                " exceed the random stream's 2^64 blocks");
}

int64_t SyntheticDataset::read(int64_t i, float* out) const {
    check_index(i, "SyntheticDataset");
    const uint64_t bps = uint64_t(numel_ + 3) / 4;
    const int64_t label = int64_t(bounded_u32(
        philox_block(seed_, uint64_t(i), kSyntheticStream | 0).x[0], uint64_t(num_classes_)));
    for (int64_t b = 0; b * 4 < numel_; ++b) {
        const Philox4 noise = philox_block(seed_, uint64_t(i) * bps + b, kSyntheticStream | 1);
        const Philox4 proto = philox_block(seed_, uint64_t(label) * bps + b, kSyntheticStream | 2);
        for (int64_t w = 0; w < 4 && b * 4 + w < numel_; ++w)
            out[b * 4 + w] = 0.5f * uniform_f32(proto.x[w]) + 0.5f * uniform_f32(noise.x[w]);
    }
    return label;
}

}  // namespace ember::data
