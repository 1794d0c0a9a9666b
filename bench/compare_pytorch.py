#!/usr/bin/env python3
"""ember's training beside PyTorch's, on the same model, optimizer, schedule and batch, on the CPU or a GPU.

Run it with a Python that has PyTorch 2.x (it installs nothing; the standard
library and torch are all it uses), from any directory:

    python3 bench/compare_pytorch.py train --model mlp --epochs 5
    python3 bench/compare_pytorch.py train --model gpt --seed 1
    python3 bench/compare_pytorch.py step --model resnet8 --rounds 5 [--amp bf16]
    python3 bench/compare_pytorch.py step --model gpt --rounds 5
    python3 bench/compare_pytorch.py step --model resnet8 --device cuda [--amp bf16]
    python3 bench/compare_pytorch.py step --model gpt --device cuda --data-dir DIR [--amp bf16]
    python3 bench/compare_pytorch.py train --model gpt --device cuda --data-dir DIR [--amp bf16]
    python3 bench/compare_pytorch.py convs --rounds 3

train: runs `ember train` with its defaults (AdamW at the LR and weight decay
its start table reports, betas 0.9/0.999, eps 1e-8, the decay on matrices and
kernels and none on biases and norms; OneCycle: pct_start 0.3, div_factor 25, final_div_factor 1e4, cosine,
beta1 cycled 0.95 -> 0.85 -> 0.95; batch 128, the last partial batch kept;
pixels / 255 normalized by 0.2860 / 0.3530; random horizontal flips, and for
resnet8 28x28 crops of the image padded by 2; evaluation on the test split in
eval mode), then a PyTorch mirror of the same run: default initialization
(ember's bounds are the same, its random streams are not, so accuracies agree
in range, not digit for digit), AdamW fused as ember's update is, batches
shuffled and augmented on the training thread (ember's loader uses one worker
thread). With --memory-format channels_last both engines' batches, and PyTorch's
model, are channels-last. Both run as child processes, so their peak RSS (shared libraries
included) is measured the same way. Prints, per engine, training samples/s
(mean over epochs, and the last epoch; evaluation excluded), epoch time, final
test accuracy and peak RSS, and ember / PyTorch of samples/s.

step: the median time of one training step (forward, cross-entropy, backward,
plain SGD at lr 0.01: what `ember bench train` times) on a fixed random batch;
ember's from `ember bench train --json` (for resnet8 also its step on a
channels-last batch), PyTorch's eager, channels_last (resnet8) and
torch.compile (the model compiled, the optimizer eager; reported unavailable
where compiling fails). Rounds interleave ember and each PyTorch variant; the
ratio is the fastest PyTorch time over the fastest ember time (> 1: ember
faster). `ember bench train` has fixed batches: 256 (mlp) and 128 (resnet8),
or 32 and 8 with its --quick. --amp bf16: the forward and the loss under
autocast to bf16 in both (`ember bench train --amp bf16`,
torch.autocast("cpu", dtype=torch.bfloat16)), every variant.

--device cuda: both engines on cuda:0, eager, f32 with TF32 off in both
(PyTorch's cuDNN would use TF32 for f32 convolutions by default; ember's
never does) and cuDNN's benchmark mode on in both; --amp bf16 adds autocast
to bf16 in both (ember train --amp bf16, torch.autocast). train: as above,
PyTorch's data kept on the GPU and augmented there, every epoch's time taken
after a torch.cuda.synchronize(). step: ember's real training loop, `ember
train --data synthetic` (samples in memory, its loader's worker threads,
pinned staging and copy stream, AdamW at ember's LR and weight decay,
constant schedule), timed by its own step records: each --repeats steps end
with the one read of the loss, so a record's samples/s is the GPU's rate;
the first record (cuDNN's tuning, the allocator's growth) is dropped, the
median of the next --rounds is kept. PyTorch runs the same steps (fused
AdamW at the same LR and weight decay, the loss summed on the device) on one
fixed batch already on the GPU, --repeats steps between two
torch.cuda.synchronize() calls, a warm-up window first, the median of
--rounds windows; eager, and channels_last for resnet8, and torch.compile
unless --no-compile. ember's share of time waiting for its loader is
printed: above a few percent, its number is the loader's, not the step's
(raise --workers).

--model gpt: `ember train --model gpt` with its defaults (fortunes, character
tokens, 4 blocks of 4 heads, width 128, context 256, batch 16, AdamW with
OneCycle, gradients clipped at 1) beside the mirror in bench/torch_gpt.py (the
same text, split, windows per epoch, model, initialization scheme and
schedule); the validation loss per token after each epoch compared instead of
an accuracy. step: `ember bench train`'s gpt step (batch 16 x 256, 4 x 32 with
--quick) beside PyTorch's eager (F.scaled_dot_product_attention) and
torch.compile. With --device cuda (the fused CUDA attention, docs/cuda.md):
train runs both on the GPU (--data-dir: the text's folder; the windows on
the GPU in PyTorch's mirror), and step times `ember train --model gpt`'s own
step records (its config's block, layers, heads, width, batch) beside
PyTorch's same step (autocast with --amp bf16, gradients clipped at 1, fused
AdamW at ember's LR and weight decay) on one batch of windows on the GPU.

convs: each pass (forward, grad_input, grad_weight) of each of resnet8's
convolutions at batch 128, timed alone: ember's NCHW and channels-last
kernels (`ember bench conv --json`) beside PyTorch's on NCHW and
channels-last tensors, rounds interleaving the two, and the fastest
PyTorch layout's time over the fastest ember layout's.

Both modes print how many CPUs other processes kept busy meanwhile: with as
many threads as cores, one busy core slows either engine many times over.
--json prints one JSON object instead of the tables.
"""
import argparse, copy, gzip, json, math, os, re, statistics, struct, sys, tempfile, time
from pathlib import Path

from compare_common import (OtherLoad, cuda_settings, device_args, fused_adamw, info_line,
                            load_line, precision, run_child, summarize, torch_info)

REPO = Path(__file__).resolve().parent.parent
MEAN, STD = 0.2860, 0.3530                       # Fashion-MNIST's training-set statistics
BENCH_BATCH = {"mlp": (256, 32), "resnet8": (128, 8), "gpt": (16, 4)}  # `ember bench train` (normal, --quick)
GPT = {"vocab": 113, "layers": 4, "heads": 4, "embd": 128}  # `ember bench train`'s gpt (bench/train.cpp)
PARAMS = {"mlp": 535818, "resnet8": 77754}            # nn/models.h


# ---- The models, as ember builds them (nn/models.cpp) ----

def make_model(name):
    import torch.nn as nn
    if name == "mlp":  # default init in both: U(±1/√fan_in) for weights and biases
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256),
                             nn.ReLU(), nn.Linear(256, 10))

    def conv_bn(cin, cout, k, stride=1, relu=False):
        layers = [nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout)]
        return nn.Sequential(*layers, *([nn.ReLU()] if relu else []))

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = conv_bn(cin, cout, 3, stride, relu=True)
            self.conv2 = conv_bn(cout, cout, 3)
            self.shortcut = conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else None

        def forward(self, x):
            skip = self.shortcut(x) if self.shortcut is not None else x
            return (self.conv2(self.conv1(x)) + skip).relu()

    model = nn.Sequential(conv_bn(1, 16, 3, relu=True), BasicBlock(16, 16, 1), BasicBlock(16, 32, 2),
                          BasicBlock(32, 64, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
    assert sum(p.numel() for p in model.parameters()) == PARAMS[name], "the mirror drifted from nn/models.h"
    return model


# ---- Fashion-MNIST from its IDX files, and ember's transforms ----

def default_data_dir():
    env = os.environ.get("EMBER_DATA")
    return os.path.join(env, "fashion-mnist") if env else "/usr/share/datasets/fashion-mnist"


def read_idx(root, name):
    import torch
    for path, opener in ((os.path.join(root, name), open), (os.path.join(root, name + ".gz"), gzip.open)):
        if os.path.exists(path):  # the raw file wins, as in ember
            with opener(path, "rb") as f:
                data = bytearray(f.read())
            zero, code, ndim = struct.unpack(">HBB", data[:4])
            if zero != 0 or code != 0x08:
                sys.exit(f"{path}: not an IDX file of unsigned bytes")
            dims = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
            return torch.frombuffer(data, dtype=torch.uint8, offset=4 + 4 * ndim).view(*dims)
    sys.exit(f"{root}: no {name} (raw or .gz); pass --data-dir or set EMBER_DATA")


def augment(x, crop, gen):
    """x: f32 [B, 1, 28, 28] in [0, 1]. RandomCrop(28, padding 2, fill 0) for resnet8,
    RandomHorizontalFlip(0.5), Normalize: ember's train_transforms, batched."""
    import torch
    import torch.nn.functional as F
    b, dev = x.shape[0], x.device  # gen is a generator of x's device
    if crop:
        padded, r = F.pad(x[:, 0], (2, 2, 2, 2)), torch.arange(28, device=dev)
        oy = torch.randint(0, 5, (b,), generator=gen, device=dev)
        ox = torch.randint(0, 5, (b,), generator=gen, device=dev)
        x = padded[torch.arange(b, device=dev)[:, None, None], (oy[:, None] + r)[:, :, None],
                   (ox[:, None] + r)[:, None, :]].unsqueeze(1)
    flip = torch.rand(b, generator=gen, device=dev) < 0.5
    x = torch.where(flip[:, None, None, None], x.flip(-1), x)
    return (x - MEAN) / STD


# ---- The PyTorch side of `train`, run in a child process ----

def torch_train(cfg):
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(cfg["threads"])
    torch.manual_seed(cfg["seed"])
    dev = torch.device(cfg.get("device", "cpu"))
    cuda = dev.type == "cuda"
    if cuda:
        cuda_settings(torch)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    amp = cfg.get("amp", "off") == "bf16"
    root = cfg["data_dir"]
    xtr, ytr = read_idx(root, "train-images-idx3-ubyte"), read_idx(root, "train-labels-idx1-ubyte")
    xte, yte = read_idx(root, "t10k-images-idx3-ubyte"), read_idx(root, "t10k-labels-idx1-ubyte")
    if 0 < cfg["limit"] < len(xtr):
        xtr, ytr = xtr[:cfg["limit"]], ytr[:cfg["limit"]]
    # On a GPU the whole data set (47 MB of bytes) lives there, batches are gathered and augmented there.
    xtr, ytr, yte = xtr.unsqueeze(1).to(dev), ytr.long().to(dev), yte.long().to(dev)
    xte = ((xte.unsqueeze(1).float() / 255 - MEAN) / STD).to(dev)
    model = make_model(cfg["model"]).to(dev)
    last = cfg.get("memory_format") == "channels_last"  # the model and every batch NHWC
    fmt = torch.channels_last if last else torch.contiguous_format
    if last:
        model = model.to(memory_format=fmt)
        xte = xte.contiguous(memory_format=fmt)
    params = [p for p in model.parameters() if p.requires_grad]
    lr = cfg["lr"]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = fused_adamw(torch, groups, lr)
    n, batch, epochs = len(xtr), cfg["batch"], cfg["epochs"]
    steps = math.ceil(n / batch)  # drop_last off, as ember's loader
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=lr, total_steps=max(2, steps * epochs), pct_start=0.3, anneal_strategy="cos",
        cycle_momentum=True, base_momentum=0.85, max_momentum=0.95, div_factor=25, final_div_factor=1e4)
    gen = torch.Generator(device=dev).manual_seed(cfg["seed"])
    autocast = lambda: torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=amp)
    records = []
    for epoch in range(epochs):
        model.train()
        sync()
        start, loss_sum = time.perf_counter(), torch.zeros((), dtype=torch.float64, device=dev)
        perm = torch.randperm(n, generator=gen, device=dev)
        for i in range(0, n, batch):
            idx = perm[i:i + batch]
            x = augment(xtr[idx].float().div_(255), cfg["model"] == "resnet8", gen)
            x = x.contiguous(memory_format=fmt) if last else x
            with autocast():
                loss = F.cross_entropy(model(x), ytr[idx])
            loss.backward()
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            loss_sum += loss.detach()
        sync()  # the GPU's work for the epoch is done
        secs = time.perf_counter() - start
        model.eval()
        correct, test_loss = 0, 0.0
        with torch.no_grad(), autocast():
            for i in range(0, len(xte), 1000):
                logits = model(xte[i:i + 1000]).float()
                test_loss += F.cross_entropy(logits, yte[i:i + 1000], reduction="sum").item()
                correct += (logits.argmax(1) == yte[i:i + 1000]).sum().item()
        records.append({"epoch": epoch, "train_loss": loss_sum.item() / steps, "epoch_time_s": secs,
                        "samples_per_s": n / secs, "test_loss": test_loss / len(xte),
                        "test_acc": correct / len(xte)})
    return {"epochs": records, "params": sum(p.numel() for p in params)}


def train_mode(a):
    if a.model == "gpt":
        import torch_gpt
        return torch_gpt.train_mode(a, __file__)
    data_dir, load = a.data_dir or default_data_dir(), OtherLoad()
    with tempfile.TemporaryDirectory(prefix="ember-vs-torch-") as tmp:
        cmd = [a.ember, "train", "--model", a.model, "--epochs", a.epochs, "--batch-size", a.batch_size,
               "--limit", a.limit, "--threads", a.threads, "--seed", a.seed, *device_args(a),
               "--data-dir", data_dir, "--log-every", 1 << 30, "--out", os.path.join(tmp, "run"),
               "--memory-format", a.memory_format]
        ember_out, ember_rss = run_child(cmd)
        with open(os.path.join(tmp, "run", "metrics.jsonl")) as f:
            records = [json.loads(line) for line in f if line.strip()]
    ember = summarize([r for r in records if r.get("kind") == "epoch"], ember_rss)
    # The mirror uses the LR and weight decay ember's start table says it used.
    m = re.search(r"optimizer\s+adamw, lr ([0-9.e+-]+), weight decay ([0-9.e+-]+)", ember_out)
    if not m:
        sys.exit("compare_pytorch: ember's start table has no 'optimizer adamw, lr ..., weight decay ...' line")
    cfg = {"model": a.model, "epochs": a.epochs, "batch": a.batch_size, "limit": a.limit,
           "threads": a.threads, "seed": a.seed, "data_dir": data_dir, "device": a.device, "amp": a.amp,
           "lr": float(m.group(1)), "weight_decay": float(m.group(2)),
           "memory_format": a.memory_format}
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    out, torch_rss = run_child([sys.executable, __file__, "_torch_worker", json.dumps(cfg)], env)
    worker = json.loads(out.strip().splitlines()[-1])
    torch_res = summarize(worker["epochs"], torch_rss)
    ratio, busy = ember["samples_per_s_mean"] / torch_res["samples_per_s_mean"], load.cpus()
    res = {"mode": "train", "config": cfg, "torch": worker["torch"], "ember": ember,
           "pytorch": torch_res, "ember_over_pytorch_samples_per_s": ratio, "other_busy_cpus": busy}
    if a.json:
        return print(json.dumps(res, indent=2))
    samples = a.limit if a.limit > 0 else "all"
    where = f"{a.threads} threads" if a.device == "cpu" else f"{a.device}, {precision(a)}"
    layout = ", channels_last" if a.memory_format == "channels_last" else ""
    print(f"train: {a.model} ({worker['params']} parameters), {a.epochs} epoch(s), batch {a.batch_size}, "
          f"{where}{layout}, {samples} training samples")
    print(info_line(worker["torch"]))
    rows = [("samples/s, mean over epochs", "samples_per_s_mean", "{:.0f}"),
            ("samples/s, last epoch", "samples_per_s_last", "{:.0f}"),
            ("epoch time (s), mean", "epoch_time_s_mean", "{:.2f}"),
            ("test accuracy, last epoch", "test_acc", "{:.2%}"), ("peak RSS (MiB)", "peak_rss_mib", "{:.0f}")]
    print(f"\n{'':30}{'ember':>12}{'PyTorch':>12}")
    for label, key, fmt in rows:
        cell = lambda v: fmt.format(v) if v is not None else "-"
        print(f"{label:30}{cell(ember[key]):>12}{cell(torch_res[key]):>12}")
    print(f"\nember / PyTorch samples/s: {ratio:.2f}x{load_line(busy)}")


def step_mode(a):
    if a.device == "cuda":
        return step_mode_cuda(a)
    import torch
    import torch.nn.functional as F
    normal, quick = BENCH_BATCH[a.model]
    batch = a.batch or normal
    if batch not in (normal, quick):
        sys.exit(f"step: `ember bench train` times {a.model} at batch {normal} (or {quick}, --quick) only")
    torch.set_num_threads(a.threads)
    if a.model == "gpt":
        import torch_gpt
        cfg = {**GPT, "batch": batch, "block": 256 if batch == normal else 32}
        variants, unavailable = torch_gpt.step_variants(torch, cfg, a.no_compile, a.warmup, a.amp == "bf16")
        return time_steps(a, batch, quick, variants, unavailable)
    torch.manual_seed(1)
    x = torch.randn(batch, 784) if a.model == "mlp" else torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    base = make_model(a.model)

    def variant(memory_format=None, compiled=False):
        model, xv = copy.deepcopy(base), x
        if memory_format is not None:
            model, xv = model.to(memory_format=memory_format), x.contiguous(memory_format=memory_format)
        run = torch.compile(model) if compiled else model
        opt = torch.optim.SGD(model.parameters(), lr=0.01)  # ember bench train: optim::SGD, lr 0.01

        def step():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.amp == "bf16"):
                loss = F.cross_entropy(run(xv), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss.item()
        for _ in range(5 + a.warmup):  # ember: 5 checking steps, 1 for memory, then the warm-up
            step()
        return step

    variants, unavailable = {"eager": variant()}, {}
    if a.model == "resnet8":
        variants["channels_last"] = variant(torch.channels_last)
    if not a.no_compile:
        try:
            variants["compile"] = variant(compiled=True)
        except Exception as e:  # no compiler, an unsupported op, ...
            unavailable["compile"] = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"[:160]
    return time_steps(a, batch, quick, variants, unavailable)


def time_steps(a, batch, quick, variants, unavailable):
    """Rounds of `ember bench train` interleaved with the PyTorch variants' steps; the table."""
    env, load = dict(os.environ, OMP_NUM_THREADS=str(a.threads)), OtherLoad()
    # `ember bench train` times both models; its threads are OpenMP's default, set by the environment.
    cmd = [a.ember, "bench", "train", "--json", "--repeats", a.repeats, "--warmup", a.warmup]
    cmd += ["--model", a.model] if a.model == "gpt" else []  # (resnet8's rows: both layouts)
    cmd += ["--quick"] if batch == quick else []
    cmd += ["--amp", "bf16"] if a.amp == "bf16" else []
    # ember's variants: its default step, and for resnet8 the step on a channels-last batch.
    bf16 = " bf16" if a.amp == "bf16" else ""
    ember_rows = {"ember": f"{a.model}{bf16} step"}
    if a.model == "resnet8":
        ember_rows["ember channels_last"] = f"{a.model} channels_last{bf16} step"
    times = {**{k: [] for k in ember_rows}, **{k: [] for k in variants}}
    for _ in range(a.rounds):
        rows = json.loads(run_child(cmd, env)[0])
        for name, kernel in ember_rows.items():
            times[name].append(next(r["ms"] for r in rows if r["kernel"] == kernel))
        for name, step in variants.items():
            ms = []
            for _ in range(a.warmup):  # as ember's warm-up in each round
                step()
            for _ in range(a.repeats):
                start = time.perf_counter()
                step()
                ms.append((time.perf_counter() - start) * 1e3)
            times[name].append(statistics.median(ms))
    med, busy = {k: statistics.median(v) for k, v in times.items()}, load.cpus()
    fastest = min(variants, key=med.get)
    ember_best = min(ember_rows, key=med.get)
    speed = med[fastest] / med[ember_best]
    # Round by round (the machine's speed drifts between rounds, the same for both engines within
    # one): PyTorch's fastest variant that round over ember's, the median of those ratios.
    by_round = statistics.median(min(times[v][i] for v in variants) / min(times[e][i] for e in ember_rows)
                                 for i in range(a.rounds))
    res = {"mode": "step", "model": a.model, "amp": a.amp, "batch": batch, "threads": a.threads, "rounds": a.rounds,
           "repeats": a.repeats, "torch": torch_info(), "median_ms": med, "rounds_ms": times,
           "unavailable": unavailable, "fastest_pytorch": fastest, "fastest_ember": ember_best,
           "pytorch_over_ember_time": speed, "pytorch_over_ember_by_round": by_round, "other_busy_cpus": busy}
    if a.json:
        return print(json.dumps(res, indent=2))
    amp = ", forward and loss under autocast to bf16 in both" if a.amp == "bf16" else ""
    print(f"step: {a.model}, batch {batch}, {a.threads} threads; forward, cross-entropy, backward, SGD "
          f"(lr 0.01){amp}; {a.rounds} rounds x {a.repeats} steps, median")
    print(info_line(res["torch"]))
    print(f"\n{'':24}{'median ms':>10}   per round")
    for name in times:
        label = name if name in ember_rows else f"PyTorch {name}"
        print(f"{label:24}{med[name]:>10.3f}   " + " ".join(f"{t:.3f}" for t in times[name]))
    for name, why in unavailable.items():
        print(f"{'PyTorch ' + name:24}{'-':>10}   unavailable: {why}")
    print(f"\nfastest ember ({ember_best}) vs fastest PyTorch ({fastest}): {speed:.2f}x "
          f"(PyTorch ms / ember ms; > 1: ember faster){load_line(busy)}")
    print(f"round by round (each round's fastest of each engine): {by_round:.2f}x by the median")


SYNTHETIC_TRAIN = 60000  # `ember train --data synthetic`'s training samples


def ember_gpu_steps(a, batch, steps, windows):
    """`ember train --data synthetic` (gpt: its text, --data-dir) for `windows` step records of
    `steps` steps each (one epoch, constant LR). Returns the ms per step of each record, the
    epoch's share of time spent waiting for data, ember's stdout (the start table) and the run's
    config.toml as a dict."""
    data = ["--data-dir", a.data_dir] if a.model == "gpt" and a.data_dir else []
    if a.model != "gpt":
        data = ["--data", "synthetic"]
    with tempfile.TemporaryDirectory(prefix="ember-vs-torch-") as tmp:
        cmd = [a.ember, "train", "--model", a.model, *data, "--epochs", 1,
               "--batch-size", batch, "--limit", batch * steps * windows, "--log-every", steps,
               "--schedule", "constant", "--threads", a.threads, "--seed", 0, *device_args(a),
               "--out", os.path.join(tmp, "run")]
        out, _ = run_child(cmd)
        with open(os.path.join(tmp, "run", "config.toml")) as f:
            conf = dict(re.findall(r'^([a-z-]+)=\"?([^"\n]*)\"?$', f.read(), re.M))
        with open(os.path.join(tmp, "run", "metrics.jsonl")) as f:
            records = [json.loads(line) for line in f if line.strip()]
    steps_ = [r for r in records if r.get("kind") == "step"]
    epochs = [r for r in records if r.get("kind") == "epoch"]
    if len(steps_) != windows:
        sys.exit(f"step: ember wrote {len(steps_)} step records, expected {windows}")
    return ([batch * 1e3 / r["samples_per_s"] for r in steps_],
            epochs[-1].get("data_wait") if epochs else None, out, conf)


def step_mode_cuda(a):
    import torch
    import torch.nn.functional as F
    if not torch.cuda.is_available():
        sys.exit("step --device cuda: PyTorch sees no GPU")
    batch = a.batch or BENCH_BATCH[a.model][0]
    windows = 1 + a.rounds  # ember's first record is its warm-up
    if a.model != "gpt" and batch * a.repeats * windows > SYNTHETIC_TRAIN:
        sys.exit(f"step: batch {batch} x {a.repeats} steps x {windows} records exceeds the "
                 f"{SYNTHETIC_TRAIN} synthetic training samples; lower --repeats or --rounds")
    load = OtherLoad()
    ember_all, data_wait, table, conf = ember_gpu_steps(a, batch, a.repeats, windows)
    m = re.search(r"optimizer\s+adamw, lr ([0-9.e+-]+), weight decay ([0-9.e+-]+)", table)
    if not m:
        sys.exit("compare_pytorch: ember's start table has no 'optimizer adamw, lr ..., weight decay ...' line")
    lr, wd = float(m.group(1)), float(m.group(2))

    if a.model == "gpt":
        import torch_gpt
        variants, unavailable = torch_gpt.cuda_step_variants(torch, a, conf, lr, wd, fused_adamw)
        return report_cuda_steps(a, batch, lr, wd, ember_all, data_wait, load, variants, unavailable)
    cuda_settings(torch)
    dev, amp = torch.device("cuda"), a.amp == "bf16"
    torch.manual_seed(1)
    x = torch.randn(batch, 1, 28, 28, device=dev)  # both models take images (mlp flattens)
    y = torch.randint(0, 10, (batch,), device=dev)
    base = make_model(a.model)

    def variant(memory_format=None, compiled=False):
        model, xv = copy.deepcopy(base).to(dev), x
        if memory_format is not None:
            model, xv = model.to(memory_format=memory_format), x.contiguous(memory_format=memory_format)
        params = list(model.parameters())
        opt = fused_adamw(torch, [{"params": [p for p in params if p.dim() >= 2], "weight_decay": wd},
                                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}], lr)
        run = torch.compile(model) if compiled else model
        loss_sum = torch.zeros((), dtype=torch.float64, device=dev)

        def window():  # ms per step over a.repeats steps, the GPU's work included
            nonlocal loss_sum
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(a.repeats):
                with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=amp):
                    loss = F.cross_entropy(run(xv), y)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                loss_sum += loss.detach()  # as ember sums its loss on the device
            torch.cuda.synchronize()
            return (time.perf_counter() - start) * 1e3 / a.repeats
        window()  # warm-up: cuDNN's tuning, the caching allocator, compilation
        return window

    variants, unavailable = {"eager": variant()}, {}
    if a.model == "resnet8":
        variants["channels_last"] = variant(torch.channels_last)
    if not a.no_compile:
        try:
            variants["compile"] = variant(compiled=True)
        except Exception as e:  # no compiler, an unsupported op, ...
            unavailable["compile"] = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"[:160]
    return report_cuda_steps(a, batch, lr, wd, ember_all, data_wait, load, variants, unavailable)


def report_cuda_steps(a, batch, lr, wd, ember_all, data_wait, load, variants, unavailable):
    """The table (or JSON) of step --device cuda: ember's records beside each PyTorch variant."""
    times = {"ember": ember_all[1:], **{k: [w() for _ in range(a.rounds)] for k, w in variants.items()}}
    med, busy = {k: statistics.median(v) for k, v in times.items()}, load.cpus()
    fastest = min(variants, key=med.get)
    speed, eager = med[fastest] / med["ember"], med["eager"] / med["ember"]
    res = {"mode": "step", "device": "cuda", "amp": a.amp, "model": a.model, "batch": batch,
           "rounds": a.rounds, "repeats": a.repeats, "workers": a.workers, "lr": lr, "weight_decay": wd,
           "torch": torch_info("cuda"), "median_ms": med, "rounds_ms": times, "ember_warmup_ms": ember_all[0],
           "ember_data_wait": data_wait, "unavailable": unavailable, "fastest_pytorch": fastest,
           "pytorch_over_ember_time": speed, "pytorch_eager_over_ember_time": eager, "other_busy_cpus": busy}
    if a.json:
        return print(json.dumps(res, indent=2))
    print(f"step: {a.model}, batch {batch}, cuda, {precision(a)}; forward, cross-entropy, backward, fused "
          f"AdamW (lr {lr:g}, weight decay {wd:g}), zero_grad; {a.rounds} windows x {a.repeats} steps, median")
    print(info_line(res["torch"]))
    data = "its text" if a.model == "gpt" else "synthetic"
    print(f"ember: `ember train --data {data}`, {a.workers} loader workers, waiting for data "
          f"{100 * (data_wait or 0):.1f}% of the epoch")
    print(f"\n{'':24}{'ms/step':>10}   per window")
    for name in times:
        label = name if name == "ember" else f"PyTorch {name}"
        print(f"{label:24}{med[name]:>10.3f}   " + " ".join(f"{t:.3f}" for t in times[name]))
    for name, why in unavailable.items():
        print(f"{'PyTorch ' + name:24}{'-':>10}   unavailable: {why}")
    print(f"\nember speed vs PyTorch eager: {eager:.2f}x, vs fastest PyTorch ({fastest}): {speed:.2f}x "
          f"(PyTorch ms / ember ms; > 1: ember faster){load_line(busy)}")
    if data_wait is not None and data_wait > 0.05:
        print(f"note: ember waited for its loader {100 * data_wait:.0f}% of the time: its number is the "
              f"loader's rate, not the step's; raise --workers")

# resnet8's convolutions at its training batch (128): name as in `ember bench conv`, then
# input channels, image side, output channels, kernel, stride, padding.
RESNET8_CONVS = [("3x3 16->16", 16, 28, 16, 3, 1, 1), ("3x3 s2 16->32", 16, 28, 32, 3, 2, 1),
                 ("3x3 32->32", 32, 14, 32, 3, 1, 1), ("3x3 s2 32->64", 32, 14, 64, 3, 2, 1),
                 ("3x3 64->64", 64, 7, 64, 3, 1, 1), ("1x1 s2 16->32", 16, 28, 32, 1, 2, 0),
                 ("1x1 s2 32->64", 32, 14, 64, 1, 2, 0)]


def convs_mode(a):
    """Each pass of each resnet8 convolution: ember's NCHW and channels-last kernels (from
    `ember bench conv --json`) beside PyTorch's on NCHW and channels-last tensors (oneDNN), timed
    alone; rounds interleave the two engines, medians kept."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    passes = ("forward", "grad_input", "grad_weight")
    ember_rows = {}  # (layer, layout, pass) -> `ember bench conv` kernel name
    for name, *_ in RESNET8_CONVS:
        r = f"resnet8 {name}"
        ember_rows.update({(name, "nchw", "forward"): f"conv2d {r}",
                           (name, "nchw", "grad_input"): f"conv2d_backward input {r}",
                           (name, "nchw", "grad_weight"): f"conv2d_backward weight {r}",
                           (name, "cl", "forward"): f"  channels_last forward {r}",
                           (name, "cl", "grad_input"): f"  channels_last input {r}",
                           (name, "cl", "grad_weight"): f"  channels_last weight {r}"})
    torch_calls = {}
    for name, c, hw, o, k, st, pad in RESNET8_CONVS:
        for layout in ("nchw", "cl"):
            fmt = torch.channels_last if layout == "cl" else torch.contiguous_format
            x = torch.randn(128, c, hw, hw).contiguous(memory_format=fmt)
            w = torch.randn(o, c, k, k).contiguous(memory_format=fmt)
            dy = F.conv2d(x, w, None, st, pad).contiguous(memory_format=fmt)

            def bwd(mask, x=x, w=w, dy=dy, st=st, pad=pad):
                return torch.ops.aten.convolution_backward(dy, x, w, None, [st, st], [pad, pad], [1, 1],
                                                           False, [0, 0], 1, mask)
            torch_calls[(name, layout, "forward")] = lambda x=x, w=w, st=st, pad=pad: F.conv2d(x, w, None, st, pad)
            torch_calls[(name, layout, "grad_input")] = lambda bwd=bwd: bwd([True, False, False])
            torch_calls[(name, layout, "grad_weight")] = lambda bwd=bwd: bwd([False, True, False])
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    cmd = [a.ember, "bench", "conv", "--json", "--repeats", str(a.repeats)]
    ember_ms, torch_ms = {key: [] for key in ember_rows}, {key: [] for key in torch_calls}
    for _ in range(a.rounds):
        rows = {r["kernel"]: r["ms"] for r in json.loads(run_child(cmd, env)[0])}
        for key, kernel in ember_rows.items():
            ember_ms[key].append(rows[kernel])
        for key, call in torch_calls.items():
            call()
            ms = []
            for _ in range(a.repeats):
                start = time.perf_counter()
                call()
                ms.append((time.perf_counter() - start) * 1e3)
            torch_ms[key].append(statistics.median(ms))
    em = {k: statistics.median(v) for k, v in ember_ms.items()}
    tm = {k: statistics.median(v) for k, v in torch_ms.items()}
    if a.json:
        return print(json.dumps({"mode": "convs", "torch": torch_info(), "rounds": a.rounds,
                                 "ember_ms": {"/".join(k): v for k, v in em.items()},
                                 "torch_ms": {"/".join(k): v for k, v in tm.items()}}, indent=2))
    print(f"convs: resnet8's convolutions at batch 128, {a.threads} threads; each pass alone, "
          f"median of {a.rounds} rounds (ms)")
    print(info_line(torch_info()))
    print(f"\n{'layer':15}{'pass':12}{'ember':>8}{'ember cl':>9}{'torch':>8}{'torch cl':>9}"
          f"{'  best torch / best ember':>26}")
    for name, *_ in RESNET8_CONVS:
        for ps in passes:
            e, ec = em[(name, "nchw", ps)], em[(name, "cl", ps)]
            t, tc = tm[(name, "nchw", ps)], tm[(name, "cl", ps)]
            print(f"{name:15}{ps:12}{e:8.3f}{ec:9.3f}{t:8.3f}{tc:9.3f}{min(t, tc) / min(e, ec):26.2f}")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "_torch_worker":  # the child of `train`
        cfg = json.loads(sys.argv[2])
        if cfg["model"] == "gpt":
            import torch_gpt
            result = torch_gpt.train(cfg, fused_adamw)
        else:
            result = torch_train(cfg)
        print(json.dumps({**result, "torch": torch_info(cfg.get("device", "cpu").split(":")[0])}))
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="mode", required=True)
    for name in ("train", "step"):
        s = sub.add_parser(name)
        s.add_argument("--model", choices=["mlp", "resnet8", "gpt"], default="mlp")
        s.add_argument("--threads", type=int, default=2, help="OpenMP threads of both engines")
        s.add_argument("--ember", default=str(REPO / "build/release/tools/ember"), help="the ember binary")
        s.add_argument("--json", action="store_true", help="print JSON instead of tables")
        s.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where both engines train")
        s.add_argument("--amp", choices=["off", "bf16"], default="off",
                       help="bf16: autocast in both (ember train --amp bf16, torch.autocast)")
        s.add_argument("--workers", type=int, help="ember's loader threads (default: ember train's; "
                                                   "step --device cuda: 4)")
    t = sub.choices["train"]
    t.add_argument("--epochs", type=int, help="default: 5; gpt: ember's default")
    t.add_argument("--batch-size", type=int, default=128)
    t.add_argument("--limit", type=int, default=0,
                   help="train on the first N samples (0: all); gpt: windows per epoch (0: ember's)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--memory-format", choices=["contiguous", "channels_last"], default="contiguous",
                   help="layout of the batches in both engines (ember train --memory-format; "
                        "PyTorch's model and batches in that memory format)")
    t.add_argument("--data-dir", help="Fashion-MNIST's folder (default: $EMBER_DATA/fashion-mnist, "
                                      "else the Debian package's); gpt: its text's folder")
    s = sub.choices["step"]
    s.add_argument("--batch", type=int, help="256 or 32 for mlp, 128 or 8 for resnet8 (default: the first)")
    s.add_argument("--rounds", type=int, default=3)
    s.add_argument("--repeats", type=int, help="timed steps per round (ember's --repeats; default 7, "
                                               "with --device cuda 50 per window)")
    s.add_argument("--warmup", type=int, default=2)
    s.add_argument("--no-compile", action="store_true", help="skip the torch.compile variant")
    s.add_argument("--data-dir", help="step --model gpt --device cuda: the text's folder (default: "
                                      "fortunes)")
    c = sub.add_parser("convs")
    c.add_argument("--threads", type=int, default=2, help="OpenMP threads of both engines")
    c.add_argument("--ember", default=str(REPO / "build/release/tools/ember"), help="the ember binary")
    c.add_argument("--json", action="store_true", help="print JSON instead of a table")
    c.add_argument("--rounds", type=int, default=3)
    c.add_argument("--repeats", type=int, default=7, help="timed calls per pass and round")
    a = p.parse_args()
    if a.mode == "convs":
        if not os.access(a.ember, os.X_OK):
            sys.exit(f"{a.ember}: no ember binary there; build it or pass --ember")
        return convs_mode(a)
    if a.mode == "train" and a.model != "gpt":
        a.epochs = a.epochs or 5
    if a.mode == "step":
        a.repeats = a.repeats or (50 if a.device == "cuda" else 7)
        if a.device == "cuda" and a.workers is None:
            a.workers = 4  # the loader must outrun a GPU step
    if not os.access(a.ember, os.X_OK):
        sys.exit(f"{a.ember}: no ember binary there; build it or pass --ember")
    train_mode(a) if a.mode == "train" else step_mode(a)


if __name__ == "__main__":
    main()
