"""The PyTorch mirror of ember's gpt (nn/transformer.h, train/recipes/gpt.cpp), for
bench/compare_pytorch.py --model gpt: the same text and split, the same model and
initialization scheme, the same optimizer, schedule, clipping and windows.

Text (data/text.h): Debian's fortunes, every file of /usr/share/games/fortunes
(or $EMBER_DATA/fortunes) that is not .dat/.u8, in name order; lines of "%"
separate fortunes; every 10th fortune is validation; each document followed by a
newline. Character vocabulary: the corpus's code points and the newline, sorted.
Training windows: block + 1 tokens starting anywhere; an epoch draws
`windows` distinct start positions (ember: the first of a Philox permutation,
here torch.randperm: the same distribution, other draws). Validation:
consecutive windows (stride = block), in batches of 64, the mean loss per token.

Model: token and position embeddings N(0, 0.02); blocks of pre-LayerNorm causal
self-attention (one qkv Linear, F.scaled_dot_product_attention, an output
projection) and an MLP 4x with GELU(tanh); every Linear N(0, 0.02) and zero
biases, the two residual projections N(0, 0.02 / sqrt(2·layers)); a final
LayerNorm; the head tied to the token embedding. AdamW (fused) with decay on
matrices (dim >= 2) only, OneCycleLR as ember's, gradients clipped to norm 1.
"""
import json, math, os, re, sys, tempfile, time

from compare_common import OtherLoad, device_args, info_line, load_line, precision, run_child, summarize

EVAL_BATCH = 64      # train/recipes/gpt.cpp: eval_batch_size
WINDOWS = 8192       # train/recipes/gpt.cpp: kWindowsPerEpoch


def fortunes_dir():
    env = os.environ.get("EMBER_DATA")
    return os.path.join(env, "fortunes") if env else "/usr/share/games/fortunes"


def read_fortunes(root):
    """(training documents, validation documents): ember's TextCorpus::fortunes."""
    train, val, index = [], [], 0
    names = sorted(n for n in os.listdir(root)
                   if not n.startswith(".") and not n.endswith((".dat", ".u8"))
                   and os.path.isfile(os.path.join(root, n)))
    for name in names:
        with open(os.path.join(root, name), "rb") as f:
            text = f.read().decode("utf-8")
        doc = []
        lines = [line + "\n" for line in text.split("\n")]  # ember splits at "\n" only
        lines[-1] = lines[-1][:-1]
        for line in filter(None, lines):
            if line in ("%\n", "%"):
                if doc:
                    (val if index % 10 == 9 else train).append("".join(doc))
                    index += 1
                doc = []
            else:
                doc.append(line)
        if doc:
            (val if index % 10 == 9 else train).append("".join(doc))
            index += 1
    return train, val


def tokens_of(docs, vocab):
    import torch
    ids = {ch: i for i, ch in enumerate(vocab)}
    return torch.tensor([ids[ch] for doc in docs for ch in doc + "\n"], dtype=torch.long)


def make_gpt(torch, vocab, block, layers, heads, embd):
    import torch.nn as nn
    import torch.nn.functional as F

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.proj = nn.Linear(embd, 3 * embd), nn.Linear(embd, embd)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(x).view(b, t, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).reshape(b, t, c))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn, self.ln2 = nn.LayerNorm(embd), Attention(), nn.LayerNorm(embd)
            self.fc, self.proj = nn.Linear(embd, 4 * embd), nn.Linear(4 * embd, embd)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, embd), nn.Embedding(block, embd)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(embd)
            residual = 0.02 / math.sqrt(2 * layers)
            for e in (self.wte, self.wpe):
                nn.init.normal_(e.weight, 0, 0.02)
            for b in self.blocks:
                for lin, std in ((b.attn.qkv, 0.02), (b.attn.proj, residual), (b.fc, 0.02),
                                 (b.proj, residual)):
                    nn.init.normal_(lin.weight, 0, std)
                    nn.init.zeros_(lin.bias)

        def forward(self, idx):
            h = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for b in self.blocks:
                h = b(h)
            return F.linear(self.ln_f(h), self.wte.weight)

    return GPT()


def params_of(layers, embd, vocab, block):
    """ember's count (tests/nn/test_gpt.cpp): the head is tied."""
    return layers * (12 * embd * embd + 13 * embd) + vocab * embd + block * embd + 2 * embd


def train(cfg, fused_adamw):
    """The mirror of `ember train --model gpt` with cfg's settings; epoch records."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(cfg["threads"])
    torch.manual_seed(cfg["seed"])
    dev = torch.device(cfg.get("device", "cpu"))
    if dev.type == "cuda":
        from compare_common import cuda_settings
        cuda_settings(torch)
    train_docs, val_docs = read_fortunes(cfg.get("data_dir") or fortunes_dir())
    vocab = sorted(set("".join(train_docs) + "".join(val_docs)) | {"\n"})
    tr, va = tokens_of(train_docs, vocab).to(dev), tokens_of(val_docs, vocab).to(dev)
    block, batch = cfg["block"], cfg["batch"]
    model = make_gpt(torch, len(vocab), block, cfg["layers"], cfg["heads"], cfg["embd"]).to(dev)
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = fused_adamw(torch, groups, cfg["lr"])
    windows = cfg["limit"] if cfg["limit"] > 0 else WINDOWS
    steps = math.ceil(windows / batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=cfg["lr"], total_steps=max(2, steps * cfg["epochs"]), pct_start=0.3,
        anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85, max_momentum=0.95,
        div_factor=25, final_div_factor=1e4)
    positions = len(tr) - block  # starts of windows of block + 1 tokens
    offsets = torch.arange(block + 1, device=dev)
    starts = torch.arange(0, len(va) - block, block, device=dev)  # validation: consecutive windows
    gen = torch.Generator().manual_seed(cfg["seed"])
    amp = cfg.get("amp", "off") == "bf16"
    records = []
    for epoch in range(cfg["epochs"]):
        model.train()
        start, loss_sum = time.perf_counter(), 0.0
        chosen = torch.randperm(positions, generator=gen)[:windows].to(dev)
        for i in range(0, windows, batch):
            w = tr[chosen[i:i + batch, None] + offsets]
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
                logits = model(w[:, :-1])
            loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), w[:, 1:].reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            loss_sum += loss.item()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        secs = time.perf_counter() - start
        model.eval()
        total, count = 0.0, 0
        with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
            for i in range(0, len(starts), EVAL_BATCH):
                w = va[starts[i:i + EVAL_BATCH, None] + offsets]
                logits = model(w[:, :-1]).float()
                total += F.cross_entropy(logits.view(-1, logits.shape[-1]), w[:, 1:].reshape(-1),
                                         reduction="sum").item()
                count += w[:, 1:].numel()
        records.append({"epoch": epoch, "train_loss": loss_sum / steps, "epoch_time_s": secs,
                        "samples_per_s": windows / secs, "test_loss": total / count})
    return {"epochs": records, "params": sum(p.numel() for p in params)}


def step_variants(torch, cfg, no_compile, warmup, bf16=False):
    """`ember bench train`'s gpt step in PyTorch (forward, cross-entropy over the
    tokens, backward, SGD at lr 0.01 on a fixed batch; the forward and loss under
    autocast to bf16 with bf16): eager and torch.compile."""
    import copy
    import torch.nn.functional as F
    torch.manual_seed(1)
    vocab, block, batch = cfg["vocab"], cfg["block"], cfg["batch"]
    x = torch.randint(0, vocab, (batch, block))
    y = torch.randint(0, vocab, (batch, block))
    base = make_gpt(torch, vocab, block, cfg["layers"], cfg["heads"], cfg["embd"])

    def variant(compiled):
        model = copy.deepcopy(base)
        run = torch.compile(model) if compiled else model
        opt = torch.optim.SGD(model.parameters(), lr=0.01)

        def step():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = F.cross_entropy(run(x).view(-1, vocab), y.view(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss.item()
        for _ in range(5 + warmup):
            step()
        return step

    variants, unavailable = {"eager": variant(False)}, {}
    if not no_compile:
        try:
            variants["compile"] = variant(True)
        except Exception as e:  # no compiler, an unsupported op, ...
            unavailable["compile"] = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"[:160]
    return variants, unavailable


def cuda_step_variants(torch, a, conf, lr, wd, fused_adamw):
    """`ember train --model gpt`'s step on the GPU in PyTorch (the run's config: block, layers,
    heads, embd, batch; the corpus's vocabulary): forward under autocast when --amp bf16,
    cross-entropy, backward, gradients clipped at 1, fused AdamW, zero_grad, on one batch of
    windows already on the GPU. Returns {name: window()} with window() the ms per step over
    a.repeats steps, eager and (unless --no-compile) torch.compile."""
    import copy
    import torch.nn.functional as F
    from compare_common import cuda_settings
    cuda_settings(torch)
    dev, amp = torch.device("cuda"), a.amp == "bf16"
    train_docs, val_docs = read_fortunes(a.data_dir or fortunes_dir())
    vocab = len(set("".join(train_docs) + "".join(val_docs)) | {"\n"})
    block, batch = int(conf["block"]), int(conf["batch-size"])
    torch.manual_seed(1)
    w = torch.randint(0, vocab, (batch, block + 1), device=dev)
    base = make_gpt(torch, vocab, block, int(conf["layers"]), int(conf["heads"]), int(conf["embd"]))

    def variant(compiled):
        model = copy.deepcopy(base).to(dev)
        params = list(model.parameters())
        opt = fused_adamw(torch, [{"params": [p for p in params if p.dim() >= 2], "weight_decay": wd},
                                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}], lr)
        run = torch.compile(model) if compiled else model
        loss_sum = torch.zeros((), dtype=torch.float64, device=dev)

        def window():
            nonlocal loss_sum
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(a.repeats):
                with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=amp):
                    logits = run(w[:, :-1])
                loss = F.cross_entropy(logits.float().view(-1, vocab), w[:, 1:].reshape(-1))
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
                loss_sum += loss.detach()
            torch.cuda.synchronize()
            return (time.perf_counter() - start) * 1e3 / a.repeats
        window()  # warm-up
        return window

    variants, unavailable = {"eager": variant(False)}, {}
    if not a.no_compile:
        try:
            variants["compile"] = variant(True)
        except Exception as e:  # no compiler, an unsupported op, ...
            unavailable["compile"] = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"[:160]
    return variants, unavailable


def train_mode(a, script):
    """compare_pytorch.py train --model gpt: ember's default gpt run beside the mirror
    above, run by `script` (compare_pytorch.py) in a child process."""
    load = OtherLoad()
    with tempfile.TemporaryDirectory(prefix="ember-vs-torch-") as tmp:
        cmd = [a.ember, "train", "--model", "gpt", "--threads", a.threads, "--seed", a.seed,
               *device_args(a), "--log-every", 1 << 30, "--out", os.path.join(tmp, "run")]
        cmd += ["--epochs", a.epochs] if a.epochs else []
        cmd += ["--limit", a.limit] if a.limit else []
        cmd += ["--data-dir", a.data_dir] if a.data_dir else []
        ember_out, ember_rss = run_child(cmd)
        with open(os.path.join(tmp, "run", "config.toml")) as f:
            conf = dict(re.findall(r'^([a-z-]+)=\"?([^"\n]*)\"?$', f.read(), re.M))
        with open(os.path.join(tmp, "run", "metrics.jsonl")) as f:
            records = [json.loads(line) for line in f if line.strip()]
    ember = summarize([r for r in records if r.get("kind") == "epoch"], ember_rss)
    m = re.search(r"optimizer\s+adamw, lr ([0-9.e+-]+), weight decay ([0-9.e+-]+)", ember_out)
    cfg = {"model": "gpt", "epochs": int(conf["epochs"]), "batch": int(conf["batch-size"]),
           "limit": int(conf["limit"]), "threads": a.threads, "seed": a.seed, "data_dir": a.data_dir,
           "amp": a.amp, "device": a.device, "lr": float(m.group(1)), "weight_decay": float(m.group(2)),
           **{k: int(conf[k]) for k in ("layers", "heads", "embd", "block")}}
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    out, torch_rss = run_child([sys.executable, script, "_torch_worker", json.dumps(cfg)], env)
    worker = json.loads(out.strip().splitlines()[-1])
    torch_res = summarize(worker["epochs"], torch_rss)
    ratio, busy = ember["samples_per_s_mean"] / torch_res["samples_per_s_mean"], load.cpus()
    diff = ember["epochs"][-1]["test_loss"] - torch_res["epochs"][-1]["test_loss"]
    res = {"mode": "train", "config": cfg, "torch": worker["torch"], "ember": ember, "pytorch": torch_res,
           "ember_over_pytorch_samples_per_s": ratio, "validation_loss_difference": diff,
           "other_busy_cpus": busy}
    if a.json:
        return print(json.dumps(res, indent=2))
    print(f"train: gpt ({worker['params']} parameters), {cfg['epochs']} epoch(s) of "
          f"{cfg['limit'] or 8192} windows, batch {cfg['batch']}, {a.threads} threads, seed {a.seed}, "
          f"{precision(a)}")
    print(info_line(worker["torch"]))
    print(f"\n{'':34}{'ember':>12}{'PyTorch':>12}")
    for e, t in zip(ember["epochs"], torch_res["epochs"]):
        print(f"{'validation loss, epoch ' + str(e['epoch'] + 1):34}{e['test_loss']:>12.4f}{t['test_loss']:>12.4f}")
    for label, key, fmt in (("windows/s, mean over epochs", "samples_per_s_mean", "{:.0f}"),
                            ("epoch time (s), mean", "epoch_time_s_mean", "{:.1f}"),
                            ("peak RSS (MiB)", "peak_rss_mib", "{:.0f}")):
        print(f"{label:34}{fmt.format(ember[key]):>12}{fmt.format(torch_res[key]):>12}")
    print(f"\nvalidation loss, ember - PyTorch: {diff:+.4f}; ember / PyTorch windows/s: {ratio:.2f}x"
          f"{load_line(busy)}")
