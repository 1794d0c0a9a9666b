#!/usr/bin/env python3
"""The PyTorch peer of ember's GPU benchmark rows, measured the same way.

Reads `ember bench --json` output, and for every GPU row whose kernel PyTorch
has an equivalent for (copies, casts, elementwise ops), times PyTorch on the
same shapes and dtypes on the same GPU (reductions, softmax and the nn
family's norms, cross-entropy, pooling, embedding and dropout; the matmul
family's GEMMs with the same TF32 setting, the conv family's cuDNN passes in
the same layout, attention through F.scaled_dot_product_attention's flash
backend): CUDA events around each run, the L2
flushed before it, median of repeats. Prints one line per row: both times and
ember's time over PyTorch's. Uses the PyTorch it finds; installs nothing.
Usage: torch_peer.py bench.json [--repeats N]
"""
import json
import re
import sys

import torch
import torch.nn.functional as F

A = torch.ops.aten


def shapes_of(field):
    return [tuple(int(x) for x in m.split(",") if x.strip()) for m in re.findall(r"\[([^\]]*)\]", field)]


def inputs(shapes, n, dtype=torch.float32, lo=-2.0, hi=2.0):
    """n random inputs; a second shape (a broadcast row) is used by the second input."""
    g = torch.Generator(device="cuda").manual_seed(2024)
    out = []
    for i in range(n):
        s = shapes[min(i, len(shapes) - 1)]
        out.append((torch.rand(s, device="cuda", generator=g) * (hi - lo) + lo).to(dtype))
    return out


UNARY = {
    "neg": torch.neg, "abs": torch.abs, "relu": torch.relu, "exp": torch.exp,
    "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "sigmoid": torch.sigmoid,
    "tanh": torch.tanh, "gelu": F.gelu, "gelu_tanh": lambda a: F.gelu(a, approximate="tanh"),
    "silu": F.silu,
}
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
    "maximum": torch.maximum, "minimum": torch.minimum, "eq": torch.eq, "ne": torch.ne,
    "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "relu_backward": lambda g, y: A.threshold_backward(g, y, 0),
    "sigmoid_backward": A.sigmoid_backward, "tanh_backward": A.tanh_backward,
    "gelu_backward": A.gelu_backward,
    "gelu_tanh_backward": lambda g, x: A.gelu_backward(g, x, approximate="tanh"),
    "silu_backward": A.silu_backward,
}
POSITIVE = {"log", "sqrt", "rsqrt", "pow"}
DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
          "bf16": torch.bfloat16, "i64": torch.int64}


def peer(row):
    """A no-argument function doing the row's work in PyTorch, or None."""
    family, kernel, shapes = row["family"], row["kernel"], shapes_of(row["shape"])
    if family == "copy":
        if kernel == "memcpy (limit)":
            a, b = inputs(shapes, 2)
            return lambda: b.copy_(a)
        m = re.match(r"cast (\w+)->(\w+)", kernel)
        if m:
            (a,) = inputs(shapes, 1, DTYPES[m.group(1)], 0, 100)
            to = DTYPES[m.group(2)]
            return lambda: a.to(to)
        if kernel == "contiguous(transpose)":
            (a,) = inputs(shapes, 1)
            return lambda: a.t().contiguous()
        return None
    if family == "reduce":
        return reduce_peer(kernel, shapes)
    if family == "softmax":
        return softmax_peer(kernel, shapes)
    if family == "nn":
        return nn_peer(kernel, shapes)
    if family == "matmul":
        return matmul_peer(kernel, shapes)
    if family == "conv":
        return conv_peer(kernel, shapes)
    if family == "attention":
        return attention_peer(kernel, row["shape"], shapes)
    if family != "elementwise":
        return None
    name, scalar = kernel.replace(" scalar", ""), kernel.endswith(" scalar")
    lo = 0.1 if name in POSITIVE else -2.0
    if name in UNARY:
        (a,) = inputs(shapes, 1, lo=lo)
        return lambda: UNARY[name](a)
    if name in BINARY:
        a, b = inputs(shapes, 2, lo=lo)
        f = BINARY[name]
        return (lambda: f(a, 2.5)) if scalar else (lambda: f(a, b))
    if name == "where":
        c, a, b = inputs(shapes, 3)
        c = c > 0
        return lambda: torch.where(c, a, b)
    if name == "clamp":
        (a,) = inputs(shapes, 1)
        return lambda: torch.clamp(a, -0.5, 0.5)
    return None


REDUCE = {"sum": torch.sum, "mean": torch.mean, "amax": torch.amax, "amin": torch.amin,
          "var": torch.var, "std": torch.std}


def reduce_peer(kernel, shapes):
    """ "sum dims [1]", "sum all", "max dims [1]", "norm dims [1]" on the shape."""
    m = re.match(r"(\w+) (?:dims \[([\d, ]*)\]|all)", kernel)
    if not m:
        return None
    name = m.group(1)
    dims = [int(d) for d in m.group(2).split(",")] if m.group(2) else None
    (a,) = inputs(shapes, 1)
    if name in REDUCE:
        f = REDUCE[name]
        return (lambda: f(a, dim=dims)) if dims is not None else (lambda: f(a))
    if name in ("max", "min") and dims:
        f = torch.max if name == "max" else torch.min
        return lambda: f(a, dim=dims[0])
    if name == "norm":
        return lambda: torch.linalg.vector_norm(a, 2, dim=dims)
    return None


def softmax_peer(kernel, shapes):
    """ "softmax dim 1", "log_softmax_backward dim 1"."""
    m = re.match(r"(\w+) dim (-?\d+)", kernel)
    if not m:
        return None
    name, dim = m.group(1), int(m.group(2))
    a, b = inputs(shapes, 2)
    fwd = {"softmax": lambda: torch.softmax(a, dim), "log_softmax": lambda: torch.log_softmax(a, dim)}
    if name in fwd:
        return fwd[name]
    if name == "softmax_backward":
        y = torch.softmax(b, dim)
        return lambda: A._softmax_backward_data(a, y, dim, torch.float32)
    if name == "log_softmax_backward":
        y = torch.log_softmax(b, dim)
        return lambda: A._log_softmax_backward_data(a, y, dim, torch.float32)
    return None


def nn_peer(kernel, shapes):
    """The nn family's rows (bench/nn.cpp), on the shape of each row's first input."""
    (s,) = shapes[:1]
    g = torch.Generator(device="cuda").manual_seed(2024)
    randn = lambda *shape: torch.randn(*shape, device="cuda", generator=g)
    if kernel.startswith("batch_norm"):
        x, w, b = randn(s), randn(s[1]), randn(s[1])
        if kernel.endswith("fwd"):
            return lambda: A.native_batch_norm(x, w, b, None, None, True, 0.1, 1e-5)
        _, mean, invstd = A.native_batch_norm(x, w, b, None, None, True, 0.1, 1e-5)
        gy = randn(s)
        return lambda: A.native_batch_norm_backward(gy, x, w, None, None, mean, invstd, True, 1e-5,
                                                    [True, True, True])
    if kernel.startswith("layer_norm"):
        x, w, b = randn(s), randn(s[-1]), randn(s[-1])
        if kernel.endswith("fwd"):
            return lambda: A.native_layer_norm(x, [s[-1]], w, b, 1e-5)
        _, mean, rstd = A.native_layer_norm(x, [s[-1]], w, b, 1e-5)
        gy = randn(s)
        return lambda: A.native_layer_norm_backward(gy, x, [s[-1]], mean, rstd, w, b,
                                                    [True, True, True])
    if kernel.startswith("cross_entropy"):
        rows = s[0]
        x = randn(rows, 1000).requires_grad_(kernel.endswith("bwd"))
        t = torch.randint(0, 1000, (rows,), device="cuda", generator=g)
        if kernel.endswith("fwd"):
            return lambda: F.cross_entropy(x, t, label_smoothing=0.1, reduction="none")
        loss = F.cross_entropy(x, t, label_smoothing=0.1)
        return lambda: torch.autograd.grad(loss, x, retain_graph=True)
    if kernel.startswith("max_pool2d"):
        if kernel.endswith("fwd"):
            x = randn(s)
            return lambda: F.max_pool2d(x, 2, return_indices=True)
        x = randn(s[0], s[1], 2 * s[2], 2 * s[3])
        y, idx = F.max_pool2d(x, 2, return_indices=True)
        gy = randn(y.shape)
        return lambda: A.max_pool2d_with_indices_backward(gy, x, [2, 2], [2, 2], [0, 0], [1, 1],
                                                          False, idx)
    if kernel.startswith("avg_pool2d"):
        x = randn(s)
        if kernel.startswith("avg_pool2d fwd"):
            return lambda: F.avg_pool2d(x, 3, 1, 1)
        gy = randn(s)
        return lambda: A.avg_pool2d_backward(gy, x, [3, 3], [1, 1], [1, 1], False, True, None)
    if kernel.startswith("adaptive_avg_pool2d"):
        if kernel.endswith("fwd"):
            x = randn(s)
            return lambda: F.adaptive_avg_pool2d(x, 1)
        x, gy = randn(s[0], s[1], 7, 7), randn(s)
        return lambda: A._adaptive_avg_pool2d_backward(gy, x)
    if kernel.startswith("embedding"):
        table = randn(s)
        lookups = shapes[1][0]  # "[32768, 256] [65536]": the table, then the lookups
        idx = torch.randint(0, s[0], (lookups,), device="cuda", generator=g)
        if kernel.startswith("embedding fwd"):
            return lambda: F.embedding(idx, table)
        grad = randn(lookups, s[1])
        return lambda: torch.zeros_like(table).index_add_(0, idx, grad)
    if kernel.startswith("dropout"):
        x = randn(s)
        if kernel.endswith("fwd"):
            return lambda: A.native_dropout(x, 0.1, True)
        mask = torch.rand(s, device="cuda", generator=g) > 0.1
        return lambda: A.native_dropout_backward(x, mask, 1 / 0.9)
    return None


def median_ms(f, repeats, warmup=3):
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4 + 1,
                        device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(warmup):
        f()
    times = []
    for i in range(repeats):
        flush.fill_(float(i))
        start.record()
        f()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def linear_peer(kernel, shapes):
    """bench/gpu_linalg.cpp's linear rows, e.g. "linear+bias bf16", "linear_weight_grad+bias
    unfused f32" with shapes "[m, k] [n, k]": F.linear (cuBLASLt's bias epilogue) and its
    weight and bias gradients; the unfused rows as the same separate ops."""
    m = re.match(r"(linear\+bias|linear_relu|linear_weight_grad\+bias)( unfused)? (f32|bf16)$", kernel)
    if not m or len(shapes) < 2:
        return None
    what, unfused, dt = m.group(1), m.group(2) is not None, DTYPES[m.group(3)]
    (rows, k), n = shapes[0], shapes[1][0]
    x, w, b, g = inputs([(rows, k), (n, k), (n,), (rows, n)], 4, dt)
    torch.backends.cuda.matmul.allow_tf32 = False
    if what == "linear+bias":
        return (lambda: x @ w.t() + b) if unfused else (lambda: F.linear(x, w, b))
    if what == "linear_relu":
        return lambda: torch.relu(F.linear(x, w, b))
    return lambda: (g.t() @ x, g.sum(0))


def matmul_peer(kernel, shapes):
    """bench/gpu_linalg.cpp's GEMMs: "matmul f32", "matmul f32, TF32", "matmul bf16[ (limit)]"."""
    if kernel.startswith("linear"):
        return linear_peer(kernel, shapes)
    m = re.match(r"matmul (f32|bf16)(, TF32)?( \(limit\))?$", kernel)
    if not m or not shapes:
        return None
    side, tf32 = shapes[0][0], m.group(2) is not None
    a, b = inputs([(side, side)], 2, DTYPES[m.group(1)])

    def run():
        torch.backends.cuda.matmul.allow_tf32 = tf32
        return a @ b
    return run


def conv_peer(kernel, shapes):
    """bench/gpu_linalg.cpp's cuDNN passes, e.g. "conv2d_backward input 3x3 s2 128->128 bf16,
    channels_last" on input [N, C, H, W]: padding k // 2, no bias, TF32 off."""
    m = re.match(r"(conv2d|conv2d_backward input|conv2d_backward weight) (\d+)x\d+ (?:s(\d+) )?"
                 r"(\d+)->(\d+) (f32|bf16)(, channels_last)?$", kernel)
    if not m or not shapes:
        return None
    what, k, stride = m.group(1), int(m.group(2)), int(m.group(3) or 1)
    c, o, dtype = int(m.group(4)), int(m.group(5)), DTYPES[m.group(6)]
    fmt = torch.channels_last if m.group(7) else torch.contiguous_format
    torch.backends.cudnn.allow_tf32 = False  # as ember's f32 convolutions
    torch.backends.cudnn.benchmark = True
    (x,) = inputs([shapes[0]], 1, dtype)
    x = x.contiguous(memory_format=fmt)
    (w,) = inputs([(o, c, k, k)], 1, dtype)
    w = w.contiguous(memory_format=fmt)
    pad = k // 2
    if what == "conv2d":
        return lambda: F.conv2d(x, w, None, stride, pad)
    dy = F.conv2d(x, w, None, stride, pad).contiguous(memory_format=fmt)
    mask = [what.endswith("input"), what.endswith("weight"), False]
    return lambda: A.convolution_backward(dy, x, w, None, [stride, stride], [pad, pad], [1, 1],
                                          False, [0, 0], 1, mask)


def attention_peer(kernel, field, shapes):
    """bench/attention_gpu.cpp's rows: "attention forward bf16" / "attention backward bf16" on
    [B, H, T, D] (causal or not) through F.scaled_dot_product_attention's flash backend, and
    "attention decode bf16" (one query row per head against T keys) through its default choice."""
    m = re.match(r"attention (forward|backward|decode) (bf16|f16)$", kernel)
    if not m or not shapes:
        return None
    what, dtype = m.group(1), DTYPES[m.group(2)]
    b, h, t, d = shapes[0]
    causal = field.endswith("causal")
    q, k, v, g = inputs([(b, h, 1 if what == "decode" else t, d), (b, h, t, d), (b, h, t, d),
                         (b, h, t, d)], 4, dtype)
    if what == "decode":
        return lambda: F.scaled_dot_product_attention(q, k, v)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def flash(q, k, v):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    if what == "forward":
        return lambda: flash(q, k, v)
    q, k, v = (x.requires_grad_() for x in (q, k, v))
    out = flash(q, k, v)
    return lambda: torch.autograd.grad(out, (q, k, v), g, retain_graph=True)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    repeats = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 9
    rows = [r for r in json.load(open(sys.argv[1])) if r.get("device", "cpu").startswith("cuda")]
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    print(f"{'family':<12}{'kernel':<24}{'shape':<24}{'ember ms':>10}{'torch ms':>10}"
          f"{'ember/torch':>12}  note")
    for r in rows:
        f = peer(r)
        if f is None:
            continue
        t = median_ms(f, repeats)
        # A row noted "allocates" times ember's front with its output's
        # allocation, which torch's caching allocator makes nearly free.
        print(f"{r['family']:<12}{r['kernel']:<24}{r['shape']:<24}{r['ms']:>10.4f}{t:>10.4f}"
              f"{r['ms'] / t:>12.2f}  {r.get('note', '')}")


if __name__ == "__main__":
    main()
