// Differentiable conv2d and pooling: the forward kernels, then backward
// kernels from kernels/conv.h and kernels/pool.h.
#include "autograd/autocast.h"
#include "autograd/graph.h"
#include "autograd/ops/nn_ops.h"
#include "kernels/conv.h"
#include "kernels/pool.h"

namespace ember {
using autograd::TensorList;

Tensor conv2d(const Tensor& input0, const Tensor& weight0, const Tensor& bias0, Int2 stride,
              Int2 padding, Int2 dilation, int64_t groups) {
    const Tensor input = amp::cast_input("conv2d", input0),
                 weight = amp::cast_input("conv2d", weight0), bias = amp::cast_input("conv2d", bias0);
    Tensor out = kernels::conv2d(input, weight, bias, stride, padding, dilation, groups);
    if (auto node = autograd::make_node("conv2d", {input, weight, bias})) {
        const std::array<bool, 3> need = {node->needs_input_grad(0), node->needs_input_grad(1),
                                          node->needs_input_grad(2)};
        node->backward = [x = node->save(input), w = node->save(weight), stride, padding, dilation,
                          groups, need](const TensorList& g) {
            kernels::Conv2dGrads d =
                kernels::conv2d_backward(g[0], x, w, stride, padding, dilation, groups, need);
            return TensorList{d.input, d.weight, d.bias};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor max_pool2d(const Tensor& input, Int2 kernel, Int2 stride, Int2 padding, Int2 dilation,
                  bool ceil_mode) {
    kernels::MaxPool2dResult r =
        kernels::max_pool2d(input, kernel, stride, padding, dilation, ceil_mode);
    if (auto node = autograd::make_node("max_pool2d", {input})) {
        node->backward = [x = node->save(input), idx = node->save(r.indices)](const TensorList& g) {
            return TensorList{kernels::max_pool2d_backward(g[0], x, idx)};
        };
        autograd::set_history(node, r.values);
    }
    return r.values;
}

Tensor avg_pool2d(const Tensor& input, Int2 kernel, Int2 stride, Int2 padding, bool ceil_mode,
                  bool count_include_pad) {
    Tensor out = kernels::avg_pool2d(input, kernel, stride, padding, ceil_mode, count_include_pad);
    if (auto node = autograd::make_node("avg_pool2d", {input})) {
        node->backward = [x = node->save(input), kernel, stride, padding, ceil_mode,
                          count_include_pad](const TensorList& g) {
            return TensorList{kernels::avg_pool2d_backward(g[0], x, kernel, stride, padding,
                                                           ceil_mode, count_include_pad)};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor adaptive_avg_pool2d(const Tensor& input, Int2 output_size) {
    Tensor out = kernels::adaptive_avg_pool2d(input, output_size);
    if (auto node = autograd::make_node("adaptive_avg_pool2d", {input})) {
        node->backward = [x = node->save(input)](const TensorList& g) {
            return TensorList{kernels::adaptive_avg_pool2d_backward(g[0], x)};
        };
        autograd::set_history(node, out);
    }
    return out;
}

}  // namespace ember
