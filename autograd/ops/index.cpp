// Differentiable indexing, cat/stack and split/chunk. Gathers scatter their
// gradient back (adding over repeated indices); scatters gather it.
#include "autograd/ops/index.h"

#include "autograd/graph.h"
#include "kernels/copy.h"
#include "kernels/factories.h"
#include "kernels/index.h"
#include "kernels/shape_ops.h"

namespace ember {
using autograd::TensorList;

namespace {

Tensor zeros_of(const Shape& shape, const Tensor& like) {
    return zeros(shape, {like.dtype(), like.device()});
}

}  // namespace

Tensor index_select(const Tensor& input, int64_t dim, const Tensor& index) {
    Tensor out = kernels::index_select(input, dim, index);
    if (auto node = autograd::make_node("index_select", {input})) {
        node->backward = [idx = node->save(index), shape = input.shape(),
                          dim](const TensorList& g) {
            return TensorList{kernels::index_add(zeros_of(shape, g[0]), dim, idx, g[0])};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor gather(const Tensor& input, int64_t dim, const Tensor& index) {
    Tensor out = kernels::gather(input, dim, index);
    if (auto node = autograd::make_node("gather", {input})) {
        node->backward = [idx = node->save(index), shape = input.shape(),
                          dim](const TensorList& g) {
            return TensorList{kernels::scatter_add(zeros_of(shape, g[0]), dim, idx, g[0])};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
    Tensor out = kernels::scatter_add(self, dim, index, src);
    if (auto node = autograd::make_node("scatter_add", {self, src})) {
        node->backward = [idx = node->save(index), ssrc = src.shape(), dim](const TensorList& g) {
            // src[i] went to out[index[i]]: its gradient is read back from there. Only
            // index's extent of src was used; the rest of src gets 0.
            Tensor picked = kernels::gather(g[0], dim, idx);
            if (picked.shape() != ssrc) {
                Tensor full = zeros_of(ssrc, g[0]);
                Tensor region = full;
                for (int64_t d = 0; d < idx.dim(); ++d) region = views::narrow(region, d, 0, idx.size(d));
                kernels::copy(region, picked);
                picked = full;
            }
            return TensorList{g[0], picked};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
    Tensor out = kernels::index_add(self, dim, index, source);
    if (auto node = autograd::make_node("index_add", {self, source})) {
        node->backward = [idx = node->save(index), dim](const TensorList& g) {
            return TensorList{g[0], kernels::index_select(g[0], dim, idx)};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
    Tensor out = kernels::embedding(weight, indices);
    if (auto node = autograd::make_node("embedding", {weight})) {
        node->backward = [idx = node->save(indices), shape = weight.shape()](const TensorList& g) {
            const Tensor rows = kernels::reshape(g[0], {-1, shape[1]});
            return TensorList{
                kernels::index_add(zeros_of(shape, g[0]), 0, kernels::reshape(idx, {-1}), rows)};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
    Tensor out = kernels::cat(tensors, dim);
    if (auto node = autograd::make_node("cat", tensors)) {
        const int64_t d = wrap_dim(dim, out.dim(), "cat");
        // cat skips 1-d empty inputs (shape [0]), whatever dim is: -1 marks
        // them, and their gradient is empty too.
        std::vector<int64_t> sizes;
        for (const Tensor& t : tensors) sizes.push_back(t.shape() == Shape{0} ? -1 : t.size(d));
        node->backward = [sizes, d](const TensorList& g) {
            TensorList grads;
            int64_t at = 0;
            for (int64_t s : sizes) {
                if (s < 0) {
                    grads.push_back(zeros_of({0}, g[0]));
                    continue;
                }
                grads.push_back(views::narrow(g[0], d, at, s));
                at += s;
            }
            return grads;
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
    Tensor out = kernels::stack(tensors, dim);
    if (auto node = autograd::make_node("stack", tensors)) {
        const int64_t d = wrap_dim(dim, out.dim(), "stack");
        node->backward = [n = int64_t(tensors.size()), d](const TensorList& g) {
            TensorList grads;
            for (int64_t i = 0; i < n; ++i) grads.push_back(views::select(g[0], d, i));
            return grads;
        };
        autograd::set_history(node, out);
    }
    return out;
}

namespace {

// The pieces share one node with an output each; its backward concatenates
// their gradients (the engine fills pieces that got none with zeros).
std::vector<Tensor> record_split(const char* name, const Tensor& t, std::vector<Tensor> parts,
                                 int64_t dim) {
    if (auto node = autograd::make_node(name, {t})) {
        const int64_t d = wrap_dim(dim, t.dim(), name);
        node->backward = [d](const TensorList& g) { return TensorList{kernels::cat(g, d)}; };
        autograd::set_history(node, parts);
    }
    return parts;
}

}  // namespace

// The kernels cut views with narrow; under NoGradGuard those record nothing,
// and the pieces are recorded as one node instead.
std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim) {
    std::vector<Tensor> parts;
    {
        NoGradGuard raw;
        parts = kernels::split(t, split_size, dim);
    }
    return record_split("split", t, std::move(parts), dim);
}

std::vector<Tensor> split(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim) {
    std::vector<Tensor> parts;
    {
        NoGradGuard raw;
        parts = kernels::split(t, sizes, dim);
    }
    return record_split("split", t, std::move(parts), dim);
}

std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim) {
    std::vector<Tensor> parts;
    {
        NoGradGuard raw;
        parts = kernels::chunk(t, chunks, dim);
    }
    return record_split("chunk", t, std::move(parts), dim);
}

}  // namespace ember
