#!/usr/bin/env python3
"""The PyTorch peer of ember's GPU benchmark rows, measured the same way.

Reads `ember bench --json` output, and for every GPU row whose kernel PyTorch
has an equivalent for (copies, casts, elementwise ops), times PyTorch on the
same shapes and dtypes on the same GPU: CUDA events around each run, the L2
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
}
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
    "maximum": torch.maximum, "minimum": torch.minimum, "eq": torch.eq, "ne": torch.ne,
    "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "relu_backward": lambda g, y: A.threshold_backward(g, y, 0),
    "sigmoid_backward": A.sigmoid_backward, "tanh_backward": A.tanh_backward,
    "gelu_backward": A.gelu_backward,
    "gelu_tanh_backward": lambda g, x: A.gelu_backward(g, x, approximate="tanh"),
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
