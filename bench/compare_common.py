"""Helpers bench/compare_pytorch.py and bench/torch_gpt.py share: the PyTorch
settings that mirror ember's (fused AdamW, CUDA math modes), running child
processes with their peak RSS, the load other processes put on the CPUs, and
the report's lines."""
import os, re, resource, statistics, subprocess, sys, tempfile, time


def fused_adamw(torch, groups, lr, weight_decay=None):
    """AdamW as one fused kernel, as ember's update (PyTorch's CPU default is a loop of ops)."""
    kw = {} if weight_decay is None else {"weight_decay": weight_decay}
    try:
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-8, fused=True, **kw)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-8, **kw)


def cuda_settings(torch):
    """ember's CUDA defaults in PyTorch: f32 without TF32 (PyTorch's cuDNN allows it for
    convolutions by default, ember's convolutions run FMA math), cuDNN benchmark mode on."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True


# ---- Running children: output, exit status and peak RSS of each ----

def run_child(cmd, env=None):
    """Runs cmd; returns (stdout, peak RSS in MiB). wait4 gives this child's own peak
    (RUSAGE_CHILDREN would give the largest of all children so far)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([str(c) for c in cmd], stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{stdout[-2000:]}{stderr[-2000:]}")
    return stdout, usage.ru_maxrss / 1024  # KiB on Linux


def torch_info(device="cpu"):
    import torch
    show = torch.__config__.show()
    find = lambda pat: (re.search(pat, show) or [None, "?"])[1]
    info = {"version": torch.__version__, "mkl": find(r"Math Kernel Library Version ([\d.]+)"),
            "onednn": find(r"MKL-DNN (v[\d.]+)"), "cpu_capability": find(r"CPU capability usage: (\S+)")}
    if device == "cuda":
        info.update(gpu=torch.cuda.get_device_name(0), cuda=torch.version.cuda,
                    cudnn=torch.backends.cudnn.version())
    return info


class OtherLoad:
    """CPUs that other processes kept busy, on average, since construction: all
    busy CPU time (/proc/stat) less this process's and its children's."""

    def __init__(self):
        self.start = self.sample()

    @staticmethod
    def sample():
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:9]]
        except OSError:  # not Linux
            return None
        own = sum(u.ru_utime + u.ru_stime for u in map(resource.getrusage,
                                                       (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))
        return time.monotonic(), (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK"), own

    def cpus(self):
        end = self.sample()
        if self.start is None or end is None:
            return None
        (t0, busy0, own0), (t1, busy1, own1) = self.start, end
        return max(0.0, (busy1 - busy0) - (own1 - own0)) / max(1e-9, t1 - t0)


def load_line(busy):
    if busy is None or busy < 0.2:
        return ""
    return (f"\nnote: other processes kept {busy:.1f} of {os.cpu_count()} CPUs busy during the run:"
            " these timings are not clean measurements")


def info_line(t):
    if "gpu" in t:
        return f"torch {t['version']}: {t['gpu']}, CUDA {t['cuda']}, cuDNN {t['cudnn']}"
    return f"torch {t['version']}: MKL {t['mkl']}, oneDNN {t['onednn']}, CPU capability {t['cpu_capability']}"


def device_args(a):
    """ember train's flags for --device, --amp and --workers (none given: its own defaults)."""
    args = ["--device", a.device]
    if a.amp != "off":
        args += ["--amp", a.amp]
    if a.workers is not None:
        args += ["--workers", a.workers]
    return args


def precision(a):
    return "f32, TF32 off" if a.amp == "off" else f"autocast {a.amp}"


def summarize(epochs, rss):
    return {"samples_per_s_mean": statistics.mean(e["samples_per_s"] for e in epochs),
            "samples_per_s_last": epochs[-1]["samples_per_s"],
            "epoch_time_s_mean": statistics.mean(e["epoch_time_s"] for e in epochs),
            "test_acc": epochs[-1].get("test_acc"), "peak_rss_mib": rss, "epochs": epochs}


# ---- The two modes ----
