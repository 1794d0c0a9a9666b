// CUDA conv2d through cuDNN: the forward, backward data, backward filter and
// bias gradient (host code; the kernels are cuDNN's).
//
// Math:    as the CPU twin (kernels/cpu/conv.cpp, conv_backward.cpp):
//          out = conv2d(x, w) + b; grad_input = the transposed convolution of
//          dY by w; grad_weight = Σ_n dY ⋆ x; grad_bias[o] = Σ_{n, y, x} dY[n, o, y, x].
// Layout:  contiguous NCHW x, out, dY, grad_input and OIHW w, grad_weight; or
//          (the channels_last entry points) NHWC x, out, dY, grad_input and
//          OHWI w, grad_weight — cuDNN's NHWC tensor and filter formats, the
//          layout its tensor-core kernels read.
// Dtypes:  f32 (CUDNN_FMA_MATH: no TF32, so results stay near the CPU's),
//          f64, and f16/bf16 stored as they are and accumulated in f32
//          (compute type CUDNN_DATA_FLOAT; tensor cores where cuDNN picks them).
// Cost:    2·N·O·OH·OW·(C/G)·kH·kW FLOPs per direction; at least each operand
//          read or written once; grad_bias N·O·OH·OW adds.
// Calls:   tensor, filter and convolution descriptors (groups, math type);
//          the algorithm from the device's cache (kernels/conv_algos.h), which
//          the first call of a shape fills with cudnnFind*AlgorithmEx
//          (benchmark mode: times the candidates with a workspace of at most
//          1 GiB and half the free memory — a host synchronization, once per
//          shape) or cudnnGet*Algorithm_v7 (heuristic); the workspace from the
//          caching allocator; cudnnConvolutionForward / BackwardData /
//          BackwardFilter / BackwardBias. The bias: out is filled with it and
//          the forward adds onto it (beta = 1), so f16/bf16 round once.
//          Tensors past 2^31 - 1 elements (cuDNN takes int sizes) run in chunks
//          of images; grad_weight and grad_bias accumulate over them (beta = 1).
// Determinism: set_cudnn_deterministic(true) keeps only the algorithms cuDNN
//          reports CUDNN_DETERMINISTIC; otherwise backward data and filter may
//          use atomics. The bias gradient has no choice of algorithm: taken to
//          be deterministic (the test checks two runs for the same bits).
// Note [Legacy cuDNN API]: cuDNN 9 deprecates the descriptor-based
//          convolution API but still ships it. Every call to it is in this
//          file, so moving to the graph API replaces this file alone (the
//          cache's `algo` would become an engine id).
// Test: the op table (tests/ops/entries_conv.cpp via tests/cuda/test_cuda_ops.cpp),
// edge cases and the algorithm cache in tests/cuda/test_cuda_conv.cpp; the cache
// file: tests/kernels/test_conv.cpp.
#include "kernels/cuda/conv.h"

#include "core/error.h"

#if EMBER_WITH_CUDNN
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "core/cuda_check.h"
#include "kernels/conv_algos.h"
#include "kernels/cuda/copy.h"
#include "kernels/cuda/workspace.h"
#include "kernels/view.h"
#endif

namespace ember::kernels::cuda {

#if EMBER_WITH_CUDNN

namespace {

#define EMBER_CUDNN_CHECK(call)                                                         \
    do {                                                                                \
        const cudnnStatus_t ember_st_ = (call);                                         \
        if (ember_st_ != CUDNN_STATUS_SUCCESS)                                          \
            EMBER_FAIL("cuDNN error in ", #call, ": ", cudnnGetErrorString(ember_st_)); \
    } while (0)

constexpr size_t kMaxWorkspace = size_t(1) << 30;
constexpr int64_t kMaxElements = (int64_t(1) << 31) - 1;

cudnnDataType_t data_type(DType t) {
    switch (t) {
        case DType::f32:
            return CUDNN_DATA_FLOAT;
        case DType::f64:
            return CUDNN_DATA_DOUBLE;
        case DType::f16:
            return CUDNN_DATA_HALF;
        case DType::bf16:
            return CUDNN_DATA_BFLOAT16;
        default:
            break;
    }
    EMBER_FAIL("conv2d on CUDA: expected f32, f64, f16 or bf16, got ", dtype_name(t));
}

// The math type candidates are searched under; the run uses the winner's.
cudnnMathType_t search_math(DType t) {
    if (t == DType::f32) return CUDNN_FMA_MATH;  // DEFAULT would allow TF32
    if (t == DType::f64) return CUDNN_DEFAULT_MATH;
    return CUDNN_TENSOR_OP_MATH;
}

// alpha and beta: double for double data, float otherwise (cuDNN's rule).
struct Scalar {
    float f;
    double d;
    explicit Scalar(double v) : f(float(v)), d(v) {}
    const void* ptr(DType t) const { return t == DType::f64 ? static_cast<const void*>(&d) : &f; }
};

// The descriptors of one call; each exists only when its tensor is not empty.
struct Descriptors {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;

    Descriptors(const Conv2dShape& s, DType t, bool nhwc) {
        try {
            build(s, t, nhwc);
        } catch (...) {
            release();
            throw;
        }
    }
    ~Descriptors() { release(); }
    Descriptors(const Descriptors&) = delete;
    Descriptors& operator=(const Descriptors&) = delete;

    void set_math(int math) {
        EMBER_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, cudnnMathType_t(math)));
    }

  private:
    void build(const Conv2dShape& s, DType t, bool nhwc) {
        const cudnnDataType_t dt = data_type(t);
        const cudnnTensorFormat_t format = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
        auto tensor = [&](cudnnTensorDescriptor_t& d, int64_t n, int64_t c, int64_t h, int64_t w,
                          cudnnTensorFormat_t f) {
            EMBER_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
            EMBER_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, f, dt, int(n), int(c), int(h), int(w)));
        };
        if (s.n > 0 && s.c > 0) tensor(x, s.n, s.c, s.h, s.w, format);
        if (s.n > 0 && s.o > 0) tensor(y, s.n, s.o, s.oh, s.ow, format);
        if (s.o > 0) tensor(bias, 1, s.o, 1, 1, CUDNN_TENSOR_NCHW);
        if (s.o == 0 || s.c == 0) return;
        EMBER_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
        EMBER_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, dt, format, int(s.o), int(s.c / s.groups),
                                                     int(s.kh), int(s.kw)));
        EMBER_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
        EMBER_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
            conv, int(s.ph), int(s.pw), int(s.sh), int(s.sw), int(s.dh), int(s.dw),
            CUDNN_CROSS_CORRELATION, t == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT));
        EMBER_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv, int(s.groups)));
        set_math(search_math(t));
    }
    void release() noexcept {  // destruction cannot fail in a way worth reporting
        for (cudnnTensorDescriptor_t d : {x, y, bias})
            if (d) cudnnDestroyTensorDescriptor(d);
        if (w) cudnnDestroyFilterDescriptor(w);
        if (conv) cudnnDestroyConvolutionDescriptor(conv);
        x = y = bias = nullptr, w = nullptr, conv = nullptr;
    }
};

// The buffers of one direction, for cudnnFind*Ex (which writes the output).
struct Buffers {
    const void* x;  // input, or grad_input for backward data
    const void* w;  // weight, or grad_weight for backward filter
    const void* y;  // out, or grad_out
};

// One candidate algorithm, whichever the direction.
struct Candidate {
    int algo;
    cudnnStatus_t status;
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math;
};

template <class Perf>
std::vector<Candidate> to_candidates(const std::vector<Perf>& p, int count) {
    std::vector<Candidate> out;
    for (int i = 0; i < count; ++i)
        out.push_back({int(p[size_t(i)].algo), p[size_t(i)].status, p[size_t(i)].memory,
                       p[size_t(i)].determinism, p[size_t(i)].mathType});
    return out;
}

// cuDNN's candidates for `dir`, best first: timed when `ws` is given (Find),
// else its heuristic's ranking (Get_v7).
std::vector<Candidate> candidates(ConvDirection dir, bool timed, cudnnHandle_t h,
                                  const Descriptors& d, const Buffers& b, void* ws,
                                  size_t ws_bytes) {
    void* x = const_cast<void*>(b.x);
    void* w = const_cast<void*>(b.w);
    void* y = const_cast<void*>(b.y);
    int max = 0, got = 0;
    switch (dir) {
        case ConvDirection::forward: {
            EMBER_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max));
            std::vector<cudnnConvolutionFwdAlgoPerf_t> p(size_t(std::max(max, 1)));
            if (timed)
                EMBER_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
                    h, d.x, x, d.w, w, d.conv, d.y, y, max, &got, p.data(), ws, ws_bytes));
            else
                EMBER_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y,
                                                                         max, &got, p.data()));
            return to_candidates(p, got);
        }
        case ConvDirection::backward_data: {
            EMBER_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max));
            std::vector<cudnnConvolutionBwdDataAlgoPerf_t> p(size_t(std::max(max, 1)));
            if (timed)
                EMBER_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
                    h, d.w, w, d.y, y, d.conv, d.x, x, max, &got, p.data(), ws, ws_bytes));
            else
                EMBER_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                    h, d.w, d.y, d.conv, d.x, max, &got, p.data()));
            return to_candidates(p, got);
        }
        case ConvDirection::backward_filter: {
            EMBER_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max));
            std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> p(size_t(std::max(max, 1)));
            if (timed)
                EMBER_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
                    h, d.x, x, d.y, y, d.conv, d.w, w, max, &got, p.data(), ws, ws_bytes));
            else
                EMBER_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                    h, d.x, d.y, d.conv, d.w, max, &got, p.data()));
            return to_candidates(p, got);
        }
    }
    return {};
}

// The workspace `algo` needs under the descriptor's math type; none when
// cuDNN does not take the pair for this shape (or has no such algorithm).
std::optional<size_t> workspace_size(ConvDirection dir, cudnnHandle_t h, const Descriptors& d,
                                     int algo) {
    int count = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    if (dir == ConvDirection::backward_data) count = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
    if (dir == ConvDirection::backward_filter) count = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
    if (algo < 0 || algo >= count) return std::nullopt;
    size_t bytes = 0;
    cudnnStatus_t st = CUDNN_STATUS_NOT_SUPPORTED;
    switch (dir) {
        case ConvDirection::forward:
            st = cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y,
                                                         cudnnConvolutionFwdAlgo_t(algo), &bytes);
            break;
        case ConvDirection::backward_data:
            st = cudnnGetConvolutionBackwardDataWorkspaceSize(
                h, d.w, d.y, d.conv, d.x, cudnnConvolutionBwdDataAlgo_t(algo), &bytes);
            break;
        case ConvDirection::backward_filter:
            st = cudnnGetConvolutionBackwardFilterWorkspaceSize(
                h, d.x, d.y, d.conv, d.w, cudnnConvolutionBwdFilterAlgo_t(algo), &bytes);
            break;
    }
    if (st != CUDNN_STATUS_SUCCESS) return std::nullopt;
    return bytes;
}

// The most workspace a candidate may use: 1 GiB, or half of what the device
// has free (the driver's free memory and the allocator's cached blocks).
size_t workspace_limit(StreamRef stream) {
    size_t free = 0, total = 0;
    EMBER_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    const CacheStats st = CudaContext::of(stream.device).memory_stats();
    return std::min(kMaxWorkspace, (free + (st.reserved - st.allocated)) / 2);
}

// The algorithm for `dir` of shape s: cached, or chosen now and cached.
// Leaves the descriptor's math type unspecified: the caller sets the choice's.
ConvAlgoChoice choose(ConvDirection dir, const Conv2dShape& s, DType t, bool nhwc, cudnnHandle_t h,
                      Descriptors& d, const Buffers& b, StreamRef stream) {
    const bool det = cudnn_deterministic(), bench = cudnn_benchmark();
    const ConvAlgoKey key = conv_algo_key(dir, t, s, det, bench, nhwc);
    ConvAlgoCache& cache = conv_algo_cache(stream.device.index);
    if (std::optional<ConvAlgoChoice> c = cache.find(key)) {
        if (c->workspace != kWorkspaceUnknown) return *c;
        // Read from a file: kept while this cuDNN takes the pair for this
        // shape (and, for f32, the math type is FMA's: no TF32).
        d.set_math(c->math);
        const std::optional<size_t> ws = t == DType::f32 && c->math != CUDNN_FMA_MATH
                                             ? std::nullopt
                                             : workspace_size(dir, h, d, c->algo);
        if (ws) {
            c->workspace = *ws;
            cache.put(key, *c);
            return *c;
        }
        cache.erase(key);
    }
    d.set_math(search_math(t));
    size_t limit = workspace_limit(stream);
    std::vector<Candidate> cands;
    if (bench) {
        std::optional<Workspace> ws;
        try {
            ws.emplace(stream, limit);
        } catch (const Error&) {
            limit = 0;  // time what runs without a workspace
        }
        cands = candidates(dir, true, h, d, b, limit ? ws->as<void>() : nullptr, limit);
    } else {
        cands = candidates(dir, false, h, d, b, nullptr, 0);
    }
    for (const Candidate& c : cands) {
        if (c.status != CUDNN_STATUS_SUCCESS || c.memory > limit) continue;
        if (det && c.determinism != CUDNN_DETERMINISTIC) continue;
        // f32 without TF32: tensor-op candidates are skipped, the others run
        // under FMA math (a default-math one could take TF32 kernels).
        const bool tensor_op =
            c.math == CUDNN_TENSOR_OP_MATH || c.math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
        if (t == DType::f32 && tensor_op) continue;
        const cudnnMathType_t math = t == DType::f32 ? CUDNN_FMA_MATH : c.math;
        d.set_math(math);
        const std::optional<size_t> ws = workspace_size(dir, h, d, c.algo);
        if (!ws || *ws > limit) continue;
        const ConvAlgoChoice choice{c.algo, int(math), *ws};
        cache.put(key, choice);
        return choice;
    }
    EMBER_FAIL("cuDNN offers no usable ", conv_direction_name(dir), " algorithm (", cands.size(),
               " candidates; deterministic ", det, ", benchmark ", bench, ", workspace limit ",
               limit, " bytes)");
}

cudnnHandle_t handle(StreamRef stream) {
    return static_cast<cudnnHandle_t>(CudaContext::of(stream.device).dnn_handle(stream));
}

View flat_view(const void* p, DType t, std::initializer_list<int64_t> shape) {
    View v;
    v.data = static_cast<char*>(const_cast<void*>(p));
    v.dtype = t;
    v.ndim = int(shape.size());
    int64_t stride = 1;
    for (int i = v.ndim - 1; i >= 0; --i) {
        v.shape[i] = shape.begin()[i];
        v.strides[i] = stride;
        stride *= v.shape[i];
    }
    return v;
}

void zero(void* p, DType t, int64_t numel, StreamRef stream) {
    if (p && numel > 0) cuda::fill(flat_view(p, t, {numel}), 0.0, stream);
}

// out[n, o, :] = bias[o] (NHWC: out[n, :, o]): what the forward then adds onto (beta = 1).
void fill_bias(void* out, const void* bias, const Conv2dShape& s, DType t, bool nhwc,
               StreamRef stream) {
    if (nhwc) {
        View src = flat_view(bias, t, {s.n * s.oh * s.ow, s.o});
        src.strides[0] = 0, src.strides[1] = 1;
        cuda::copy(flat_view(out, t, {s.n * s.oh * s.ow, s.o}), src, stream);
        return;
    }
    View src = flat_view(bias, t, {s.n, s.o, s.oh * s.ow});
    src.strides[0] = 0, src.strides[1] = 1, src.strides[2] = 0;
    cuda::copy(flat_view(out, t, {s.n, s.o, s.oh * s.ow}), src, stream);
}

// Images per cuDNN call, so that every tensor of a call has at most 2^31 - 1 elements.
int64_t images_per_call(const Conv2dShape& s) {
    const int64_t per = std::max({s.c * s.h * s.w, s.o * s.oh * s.ow, int64_t(1)});
    EMBER_CHECK(per <= kMaxElements && s.o * (s.c / s.groups) * s.kh * s.kw <= kMaxElements,
                "one image or the weight has more than 2^31 - 1 elements, cuDNN's limit");
    return std::max<int64_t>(1, kMaxElements / per);
}

// The shape for messages.
std::string shape_text(const Conv2dShape& s, DType t) {
    return str(dtype_name(t), " input [", s.n, ", ", s.c, ", ", s.h, ", ", s.w, "], weight [", s.o,
               ", ", s.c / s.groups, ", ", s.kh, ", ", s.kw, "], stride [", s.sh, ", ", s.sw,
               "], padding [", s.ph, ", ", s.pw, "], dilation [", s.dh, ", ", s.dw, "], groups ",
               s.groups);
}

void forward(const Conv2dShape& s, DType t, bool nhwc, const char* x, const void* w,
             const void* bias, char* out, StreamRef stream) {
    if (s.c == 0) {  // no terms: out is the bias, or zero
        if (bias)
            fill_bias(out, bias, s, t, nhwc, stream);
        else
            zero(out, t, s.n * s.o * s.oh * s.ow, stream);
        return;
    }
    const cudnnHandle_t h = handle(stream);
    const size_t es = size_t(dtype_size(t));
    const int64_t step = images_per_call(s);
    for (int64_t n0 = 0; n0 < s.n; n0 += step) {
        Conv2dShape cs = s;
        cs.n = std::min(step, s.n - n0);
        const char* xc = x + size_t(n0 * s.c * s.h * s.w) * es;
        char* yc = out + size_t(n0 * s.o * s.oh * s.ow) * es;
        Descriptors d(cs, t, nhwc);
        const ConvAlgoChoice c =
            choose(ConvDirection::forward, cs, t, nhwc, h, d, {xc, w, yc}, stream);
        d.set_math(c.math);
        if (bias) fill_bias(yc, bias, cs, t, nhwc, stream);  // after choose: Find writes yc
        const Workspace ws(stream, c.workspace);
        const Scalar one(1), beta(bias ? 1 : 0);
        EMBER_CUDNN_CHECK(cudnnConvolutionForward(h, one.ptr(t), d.x, xc, d.w, w, d.conv,
                                                  cudnnConvolutionFwdAlgo_t(c.algo), ws.as<void>(),
                                                  c.workspace, beta.ptr(t), d.y, yc));
    }
}

void backward(const Conv2dShape& s, DType t, bool nhwc, const char* dy, const char* x,
              const void* w, char* dx, void* dw, void* db, StreamRef stream) {
    const int64_t dx_numel = s.n * s.c * s.h * s.w, dw_numel = s.o * (s.c / s.groups) * s.kh * s.kw;
    if (dx_numel == 0) dx = nullptr;
    if (dw_numel == 0) dw = nullptr;
    if (s.o == 0) db = nullptr;
    if (s.o == 0 || s.n == 0) {  // sums of no terms
        zero(dx, t, dx_numel, stream);
        zero(dw, t, dw_numel, stream);
        zero(db, t, s.o, stream);
        return;
    }
    if (!dx && !dw && !db) return;
    const cudnnHandle_t h = handle(stream);
    const size_t es = size_t(dtype_size(t));
    const int64_t step = images_per_call(s);
    const Scalar one(1), zero_scale(0);
    for (int64_t n0 = 0; n0 < s.n; n0 += step) {
        Conv2dShape cs = s;
        cs.n = std::min(step, s.n - n0);
        const char* dyc = dy + size_t(n0 * s.o * s.oh * s.ow) * es;
        const size_t x_off = size_t(n0 * s.c * s.h * s.w) * es;
        const Scalar& acc = n0 == 0 ? zero_scale : one;  // later chunks add to dw and db
        Descriptors d(cs, t, nhwc);
        if (dx) {
            char* dxc = dx + x_off;
            const ConvAlgoChoice c =
                choose(ConvDirection::backward_data, cs, t, nhwc, h, d, {dxc, w, dyc}, stream);
            d.set_math(c.math);
            const Workspace ws(stream, c.workspace);
            EMBER_CUDNN_CHECK(cudnnConvolutionBackwardData(
                h, one.ptr(t), d.w, w, d.y, dyc, d.conv, cudnnConvolutionBwdDataAlgo_t(c.algo),
                ws.as<void>(), c.workspace, zero_scale.ptr(t), d.x, dxc));
        }
        if (dw) {
            const char* xc = x + x_off;
            // Find writes its output: a scratch one once dw holds earlier chunks.
            const Workspace scratch(stream, n0 > 0 ? size_t(dw_numel) * es : 0);
            const ConvAlgoChoice c = choose(ConvDirection::backward_filter, cs, t, nhwc, h, d,
                                            {xc, n0 > 0 ? scratch.as<void>() : dw, dyc}, stream);
            d.set_math(c.math);
            const Workspace ws(stream, c.workspace);
            EMBER_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
                h, one.ptr(t), d.x, xc, d.y, dyc, d.conv, cudnnConvolutionBwdFilterAlgo_t(c.algo),
                ws.as<void>(), c.workspace, acc.ptr(t), d.w, dw));
        }
        if (db)
            EMBER_CUDNN_CHECK(
                cudnnConvolutionBackwardBias(h, one.ptr(t), d.y, dyc, acc.ptr(t), d.bias, db));
    }
}

[[noreturn]] void rethrow(const Error& e, const char* op, const Conv2dShape& s, DType t,
                          StreamRef stream) {
    throw Error(str(e.what(), " [", op, " on ", stream.device, ": ", shape_text(s, t), "]"));
}

}  // namespace

void conv2d(const Conv2dShape& s, DType dtype, const void* input, const void* weight,
            const void* bias, void* out, StreamRef stream) {
    try {
        forward(s, dtype, false, static_cast<const char*>(input), weight, bias,
                static_cast<char*>(out), stream);
    } catch (const Error& e) {
        rethrow(e, "conv2d", s, dtype, stream);
    }
}

void conv2d_backward(const Conv2dShape& s, DType dtype, const void* grad_out, const void* input,
                     const void* weight, void* grad_input, void* grad_weight, void* grad_bias,
                     StreamRef stream) {
    try {
        backward(s, dtype, false, static_cast<const char*>(grad_out),
                 static_cast<const char*>(input), weight, static_cast<char*>(grad_input),
                 grad_weight, grad_bias, stream);
    } catch (const Error& e) {
        rethrow(e, "conv2d_backward", s, dtype, stream);
    }
}

void conv2d_channels_last(const Conv2dShape& s, DType dtype, const void* input, const void* weight,
                          const void* bias, void* out, StreamRef stream) {
    try {
        forward(s, dtype, true, static_cast<const char*>(input), weight, bias,
                static_cast<char*>(out), stream);
    } catch (const Error& e) {
        rethrow(e, "conv2d (channels_last)", s, dtype, stream);
    }
}

void conv2d_backward_channels_last(const Conv2dShape& s, DType dtype, const void* grad_out,
                                   const void* input, const void* weight, void* grad_input,
                                   void* grad_weight, void* grad_bias, StreamRef stream) {
    try {
        backward(s, dtype, true, static_cast<const char*>(grad_out),
                 static_cast<const char*>(input), weight, static_cast<char*>(grad_input),
                 grad_weight, grad_bias, stream);
    } catch (const Error& e) {
        rethrow(e, "conv2d_backward (channels_last)", s, dtype, stream);
    }
}

#else  // built without cuDNN

void conv2d(const Conv2dShape&, DType, const void*, const void*, const void*, void*, StreamRef) {
    EMBER_FAIL(
        "conv2d on CUDA needs cuDNN, and ember was built without it (configure with cuDNN "
        "installed, or CUDNN_ROOT pointing at it)");
}

void conv2d_backward(const Conv2dShape&, DType, const void*, const void*, const void*, void*, void*,
                     void*, StreamRef) {
    EMBER_FAIL(
        "conv2d on CUDA needs cuDNN (conv2d_backward), and ember was built without it "
        "(configure with cuDNN installed, or CUDNN_ROOT pointing at it)");
}

void conv2d_channels_last(const Conv2dShape& s, DType dtype, const void* input, const void* weight,
                          const void* bias, void* out, StreamRef stream) {
    conv2d(s, dtype, input, weight, bias, out, stream);  // fails as above
}

void conv2d_backward_channels_last(const Conv2dShape& s, DType dtype, const void* grad_out,
                                   const void* input, const void* weight, void* grad_input,
                                   void* grad_weight, void* grad_bias, StreamRef stream) {
    conv2d_backward(s, dtype, grad_out, input, weight, grad_input, grad_weight, grad_bias,
                    stream);  // fails as above
}

#endif

}  // namespace ember::kernels::cuda
