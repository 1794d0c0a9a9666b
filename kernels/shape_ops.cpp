// Front for cat, stack, split and chunk: list and shape checks, dtype
// promotion, output allocation and one dispatch for cat. split and chunk
// are views and never touch elements. Kernel: kernels/cpu/shape_ops.cpp.
#include "kernels/shape_ops.h"

#include "kernels/copy.h"
#include "kernels/cpu/shape_ops.h"
#include "kernels/front.h"

namespace ember::kernels {

namespace {

// PyTorch's legacy rule: cat skips 1-d empty tensors whatever the other shapes.
bool skipped_by_cat(const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; }

// Checks and joins `tensors` along dim; stack calls it on unsqueezed views
// under its own name.
Tensor cat_impl(const std::vector<Tensor>& tensors, int64_t dim, const char* op) {
    EMBER_CHECK(!tensors.empty(), op, ": expected a non-empty list of tensors");
    for (size_t i = 0; i < tensors.size(); ++i) {
        EMBER_CHECK(tensors[i].defined(), op, ": tensor ", i, " is undefined");
        EMBER_CHECK(tensors[i].device() == tensors[0].device(), op, ": tensor ", i, " is ",
                    describe(tensors[i]), " but tensor 0 is ", describe(tensors[0]),
                    "; all must be on one device");
    }
    std::vector<size_t> used;  // positions taking part (not skipped)
    for (size_t i = 0; i < tensors.size(); ++i)
        if (!skipped_by_cat(tensors[i])) used.push_back(i);
    if (used.empty()) used.push_back(0);  // all are [0]: they agree with each other
    const size_t r = used[0];
    const Tensor& ref = tensors[r];
    EMBER_CHECK(ref.dim() > 0, op, ": tensor ", r, " is zero-dimensional (", describe(ref),
                "); only tensors with at least one dim can be joined");
    dim = wrap_dim(dim, ref.dim(), op);

    Shape shape = ref.shape();
    shape[size_t(dim)] = 0;
    DType dtype = ref.dtype();
    for (size_t i : used) {
        const Tensor& t = tensors[i];
        bool match = t.dim() == ref.dim();
        for (int64_t d = 0; match && d < ref.dim(); ++d)
            match = d == dim || t.size(d) == ref.size(d);
        EMBER_CHECK(match, op, ": tensor ", i, " has shape ", shape_str(t.shape()), " but tensor ",
                    r, " has shape ", shape_str(ref.shape()), "; sizes must match except in dim ",
                    dim);
        shape[size_t(dim)] += t.size(dim);
        dtype = promote_types(dtype, t.dtype());
    }

    Tensor out = empty(shape, like(ref, dtype));
    std::vector<View> inputs;
    for (size_t i : used) inputs.push_back(view_of(tensors[i], op));
    const View o = view_of(out, op);
    dispatch({op, out.device(), {&out, &ref}}, [&] { cpu::cat(o, inputs, int(dim)); },
             [&](auto) {
                 // Until a cuda::cat (one launch for all inputs): one copy per
                 // input into its slice, each on the same current stream.
                 int64_t at = 0;
                 for (size_t i : used) {
                     const Tensor& t = tensors[i];
                     copy(views::narrow(out, dim, at, t.size(dim)), t);
                     at += t.size(dim);
                 }
             });
    return out;
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
    return cat_impl(tensors, dim, "cat");
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
    const char* op = "stack";
    EMBER_CHECK(!tensors.empty(), op, ": expected a non-empty list of tensors");
    for (size_t i = 0; i < tensors.size(); ++i) {
        EMBER_CHECK(tensors[i].defined(), op, ": tensor ", i, " is undefined");
        EMBER_CHECK(tensors[i].shape() == tensors[0].shape(), op, ": tensor ", i, " has shape ",
                    shape_str(tensors[i].shape()), " but tensor 0 has shape ",
                    shape_str(tensors[0].shape()), "; all must have the same shape");
    }
    dim = wrap_dim(dim, tensors[0].dim() + 1, op);
    std::vector<Tensor> views;
    for (const Tensor& t : tensors) views.push_back(views::unsqueeze(t, dim));
    return cat_impl(views, dim, op);
}

std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim) {
    const char* op = "split";
    EMBER_CHECK(t.defined(), op, ": undefined tensor");
    EMBER_CHECK(t.dim() > 0, op, ": cannot split a zero-dimensional tensor (", describe(t), ")");
    dim = wrap_dim(dim, t.dim(), op);
    EMBER_CHECK(split_size > 0, op, ": split_size must be positive, got ", split_size);
    const int64_t n = t.size(dim);
    if (n == 0) return {views::narrow(t, dim, 0, 0)};  // one empty piece, a view as the others
    std::vector<Tensor> parts;
    for (int64_t at = 0; at < n; at += split_size)
        parts.push_back(views::narrow(t, dim, at, std::min(split_size, n - at)));
    return parts;
}

std::vector<Tensor> split(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim) {
    const char* op = "split";
    EMBER_CHECK(t.defined(), op, ": undefined tensor");
    EMBER_CHECK(t.dim() > 0, op, ": cannot split a zero-dimensional tensor (", describe(t), ")");
    dim = wrap_dim(dim, t.dim(), op);
    int64_t sum = 0;
    for (int64_t s : sizes)
        EMBER_CHECK(s >= 0, op, ": sizes ", shape_str(sizes), " contain a negative size");
    for (int64_t s : sizes) {
        EMBER_CHECK(s <= t.size(dim) - sum, op, ": sizes ", shape_str(sizes), " sum to more than ",
                    "dim ", dim, " of ", describe(t));
        sum += s;
    }
    EMBER_CHECK(sum == t.size(dim), op, ": sizes ", shape_str(sizes), " sum to ", sum, " but dim ",
                dim, " of ", describe(t), " has size ", t.size(dim));
    std::vector<Tensor> parts;
    int64_t at = 0;
    for (int64_t s : sizes) {
        parts.push_back(views::narrow(t, dim, at, s));
        at += s;
    }
    return parts;
}

std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim) {
    const char* op = "chunk";
    EMBER_CHECK(t.defined(), op, ": undefined tensor");
    EMBER_CHECK(chunks > 0, op, ": chunks must be positive, got ", chunks);
    EMBER_CHECK(t.dim() > 0, op, ": cannot chunk a zero-dimensional tensor (", describe(t), ")");
    dim = wrap_dim(dim, t.dim(), op);
    const int64_t n = t.size(dim);
    if (n == 0) {  // torch.chunk gives `chunks` empty tensors; cap what a typo can allocate
        EMBER_CHECK(chunks <= (int64_t(1) << 24), op, ": ", chunks, " chunks of an empty dim of ",
                    describe(t), " is too many");
        return split(t, std::vector<int64_t>(size_t(chunks), 0), dim);
    }
    return split(t, (n - 1) / chunks + 1, dim);
}

}  // namespace ember::kernels
