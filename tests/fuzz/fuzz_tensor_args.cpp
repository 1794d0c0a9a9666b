// Fuzz target: tensor layout arguments (core/tensor.cpp from_blob,
// core/tensor_views.cpp as_strided and the views). The bytes are decoded
// into shapes, strides, offsets and a chain of view ops over a 4 KiB buffer;
// every call must succeed or throw ember::Error, and every tensor that comes
// back is read in full (a contiguous copy), so a layout that reaches outside
// the buffer is an AddressSanitizer report.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/tensor.h"
#include "support/fuzz_targets.h"

namespace ember::fuzz {

namespace {

constexpr size_t kBufferBytes = 4096;
constexpr int64_t kMaxTouched = 4096;  // elements copied per tensor (expand can make many)
alignas(64) uint8_t g_buffer[kBufferBytes];

constexpr DType kDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                             DType::i32, DType::i64, DType::u8,  DType::boolean};

// Decodes the input front to back; past its end every read is 0.
class Reader {
  public:
    Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
    uint8_t byte() {
        if (n_ == 0) return 0;
        --n_;
        return *p_++;
    }
    // Mostly small sizes and strides (-2..17); sometimes a power of two, its
    // negation, or any 64-bit value, where overflow checks are tested.
    int64_t value() {
        const uint8_t b = byte();
        if (b < 0xE0) return int64_t(b % 20) - 2;
        if (b < 0xF0) {
            const int64_t v = int64_t(uint64_t(1) << (byte() % 63));
            return b & 1 ? -v : v;
        }
        uint64_t v = 0;
        for (int i = 0; i < 8; ++i) v = v << 8 | byte();
        return int64_t(v);
    }
    Shape values(size_t n) {
        Shape s(n);
        for (auto& v : s) v = value();
        return s;
    }
    bool done() const { return n_ == 0; }

  private:
    const uint8_t* p_;
    size_t n_;
};

// Reads every element of t (bounded), through the strided copy kernel.
void touch(const Tensor& t) {
    if (t.numel() > kMaxTouched) return;
    const Tensor c = t.contiguous();
    volatile uint8_t sink = 0;
    const auto* p = static_cast<const uint8_t*>(c.data_ptr());
    for (int64_t i = 0; i < c.numel() * c.element_size(); ++i) sink = sink ^ p[i];
}

// One view op chosen by the input, applied to v. Arguments are read into
// locals first: the order in which a call's arguments are evaluated is
// unspecified, and a saved input must decode the same with every compiler.
Tensor view_op(Reader& in, const Tensor& v) {
    const int op = in.byte() % 12;
    const int64_t a = in.value(), b = in.value(), c = in.value(), d = in.value();
    const size_t n = in.byte() % 6;
    const Shape s = in.values(n);
    switch (op) {
        case 0: return v.slice(a, b, c, d);
        case 1: return v.narrow(a, b, c);
        case 2: return v.select(a, b);
        case 3: return v.expand(s);
        case 4: return v.permute(s);
        case 5: return v.transpose(a, b);
        case 6: return v.unsqueeze(a);
        case 7: return v.squeeze(a);
        case 8: return v.view(s);
        // reshape and flatten copy what they cannot view: only small tensors,
        // or an expanded one asks for terabytes (which ASan reports as a crash).
        case 9: return v.numel() <= kMaxTouched ? v.reshape(s) : v;
        case 10: return v.numel() <= kMaxTouched ? v.flatten(a, b) : v;
        default: {
            const Shape sizes = in.values(size_t(v.dim())), strides = in.values(size_t(v.dim()));
            return v.as_strided(sizes, strides, a);
        }
    }
}

}  // namespace

int tensor_args(const uint8_t* data, size_t size) {
    Reader in(data, size);
    const DType dtype = kDTypes[in.byte() % 8];
    const size_t ndim = in.byte() % 6;
    const Shape shape = in.values(ndim), strides = in.values(ndim);
    try {
        // from_blob trusts the caller about the buffer's size: read only what fits.
        const Tensor t = from_blob(g_buffer, shape, strides, {.dtype = dtype});
        if (t.storage()->nbytes() <= kBufferBytes) touch(t);
    } catch (const Error&) {
    }
    const Tensor base =
        from_blob(g_buffer, {int64_t(kBufferBytes) / dtype_size(dtype)}, {.dtype = dtype});
    Tensor v = base;
    try {
        const size_t n = in.byte() % 6;
        const Shape sizes = in.values(n), steps = in.values(n);
        const int64_t offset = in.value();
        v = base.as_strided(sizes, steps, offset);
        touch(v);
    } catch (const Error&) {
    }
    for (int op = 0; op < 8 && !in.done(); ++op) {
        try {
            v = view_op(in, v);
            touch(v);
        } catch (const Error&) {
        }
    }
    return 0;
}

}  // namespace ember::fuzz
