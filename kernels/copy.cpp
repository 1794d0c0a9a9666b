// Front for copies, casts and fills: checks, then one call through the dispatch.
#include "kernels/copy.h"

#include "kernels/cpu/copy.h"
#include "kernels/cuda/copy.h"
#include "kernels/front.h"

namespace ember::kernels {

namespace {

// Same-device copy with broadcasting and casting.
void copy_same_device(const Tensor& dst, const Tensor& src) {
    const View d = view_of(dst, "copy");
    const View s = broadcast_view(src, dst.shape(), "copy");
    dispatch(
        {"copy", dst.device(), {&dst, &src}}, [&] { cpu::copy(d, s); },
        [&](auto stream) { cuda::copy(d, s, stream); });
}

// Across devices (one side is CUDA): a dense source of dst's dtype and shape
// where it lives, one move of the bytes on the CUDA side's current stream,
// then a scatter into dst if dst is strided.
void copy_across_devices(const Tensor& dst, const Tensor& src, bool non_blocking) {
    Tensor s = src;
    if (s.dtype() != dst.dtype() || s.shape() != dst.shape() || !s.is_contiguous()) {
        s = empty(dst.shape(), like(src, dst.dtype()));
        copy_same_device(s, src);
    }
    Tensor d = dst.is_contiguous() ? dst : empty(dst.shape(), like(dst));
    const bool host_pinned = (src.device().is_cpu() && src.storage()->pinned()) ||
                             (dst.device().is_cpu() && d.storage()->pinned());
    const size_t nbytes = size_t(d.numel() * d.element_size());
    const Device on = dst.device().is_cuda() ? dst.device() : src.device();
    dispatch({"copy", on, {&d, &s}}, no_kernel, [&](auto stream) {
        cuda::memcpy(d.data_ptr(), d.device(), s.data_ptr(), s.device(), nbytes,
                     non_blocking && host_pinned, stream);
    });
    // Note: `s` and `d` may be temporaries that die when this returns. That is
    // safe with plain cudaFree (it synchronizes); the CUDA caching allocator
    // must record the copy's stream on them before reusing their memory.
    if (!d.is_same(dst)) copy_same_device(dst, d);
}

}  // namespace

void copy(const Tensor& dst, const Tensor& src, bool non_blocking) {
    EMBER_CHECK(dst.defined() && src.defined(), "copy: undefined tensor");
    EMBER_CHECK(broadcast_shapes(dst.shape(), src.shape(), "copy") == dst.shape(), "copy: source ",
                describe(src), " cannot be broadcast to destination ", describe(dst));
    if (dst.numel() == 0) return;
    for (int64_t d = 0; d < dst.dim(); ++d)
        EMBER_CHECK(dst.stride(d) != 0 || dst.size(d) == 1, "copy: destination ", describe(dst),
                    " has broadcast (stride 0) dims: several elements share one address");
    if (dst.device() == src.device())
        copy_same_device(dst, unaliased(src, dst));
    else
        copy_across_devices(dst, src, non_blocking);
    dst.storage()->bump_version();
}

void fill(const Tensor& dst, double value) {
    EMBER_CHECK(dst.defined(), "fill: undefined tensor");
    if (dst.numel() == 0) return;
    const View d = view_of(dst, "fill");
    dispatch(
        {"fill", dst.device(), {&dst}}, [&] { cpu::fill(d, value); },
        [&](auto stream) { cuda::fill(d, value, stream); });
    dst.storage()->bump_version();
}

Tensor cast(const Tensor& src, DType dtype) { return cast(src, dtype, MemoryFormat::contiguous); }

Tensor cast(const Tensor& src, DType dtype, MemoryFormat format) {
    Tensor out = empty(src.shape(), like(src, dtype), format);
    copy(out, src);
    return out;
}

Tensor clone(const Tensor& src) { return cast(src, src.dtype()); }

Tensor contiguous(const Tensor& src) { return src.is_contiguous() ? src : clone(src); }

Tensor contiguous(const Tensor& src, MemoryFormat format) {
    if (format == MemoryFormat::contiguous ? src.is_contiguous()
                                           : src.suggest_memory_format() == format)
        return src;
    Tensor out = empty(src.shape(), like(src), format);
    copy(out, src);
    return out;
}

Tensor reshape(const Tensor& src, const Shape& shape) {
    if (auto v = views::try_view(src, shape)) return *v;
    return views::view(clone(src), shape);
}

}  // namespace ember::kernels
