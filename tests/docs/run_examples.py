#!/usr/bin/env python3
"""Runs the `$ ember ...` examples of the docs, in short versions, so that
what the docs show cannot go stale: every command must exit as the docs
say (0, or the status a following `$ echo $?` shows), and every flag in the
docs' flag tables must be one the commands accept.

Usage: run_examples.py EMBER WORKDIR DOC...

Short versions: a new training run gets --limit 512 --epochs 1 (a gpt also
a tiny shape) and --out in WORKDIR; `--epochs N --extend` becomes
--epochs 2 --extend; a run directory named in the docs (runs/mlp-2026..., or a file in one)
is the last run of that model that succeeded here, or a short run of it
made for the purpose; a --profile run gets the steps its window needs.
"""
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ember, work, docs = sys.argv[1], Path(sys.argv[2]), [Path(p) for p in sys.argv[3:]]
shutil.rmtree(work, ignore_errors=True)  # run directories must be new
work.mkdir(parents=True)
failures = []
GPT_SMALL = ["--block", "32", "--layers", "1", "--embd", "32", "--heads", "2", "--batch-size", "8"]


def examples(doc):
    """(line number, command, expected exit status) of each `$ ember` line in a code block."""
    lines = doc.read_text().splitlines()
    inside = False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            inside = not inside
            continue
        if not inside or not line.startswith("$ ember "):
            continue
        status = 0
        if i + 2 < len(lines) and lines[i + 1].startswith("$ echo $?"):
            status = int(lines[i + 2].strip())
        else:  # output lines, then maybe `$ echo $?`
            for j in range(i + 1, min(i + 30, len(lines))):
                if lines[j].startswith("```") or (lines[j].startswith("$ ") and "echo $?" not in lines[j]):
                    break
                if lines[j].startswith("$ echo $?") and j + 1 < len(lines):
                    status = int(lines[j + 1].strip())
                    break
        yield i + 1, line[2:].split("  #")[0].strip(), status


def value_of(args, flag):
    return args[args.index(flag) + 1] if flag in args else None


def without(args, flag):
    if flag in args:
        k = args.index(flag)
        return args[:k] + args[k + 2:]
    return args


def run_dir(model, runs):
    """A run directory of `model` made here: the last, or a new short one."""
    if model not in runs:
        out = work / f"{model}-made"
        args, _ = short(["ember", "train", "--model", model], runs, "made")
        r = subprocess.run([ember] + args[1:], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            sys.exit(f"FAIL: a {model} run for the docs' examples: {shlex.join(args)}: "
                     f"{(r.stderr or r.stdout).strip()[-400:]}")
        runs[model] = str(out)
    return runs[model]


def short(args, runs, counter):
    """The short version of a command, and the model it trains (or None)."""
    args = [re.sub(r"^runs/([a-z0-9_]+)-[0-9-]+(?=/|$)", lambda m: run_dir(m.group(1), runs), a)
            for a in args]
    if args[1] != "train":
        return args, None
    if "--resume" in args:
        if "--extend" in args:
            args = without(args, "--epochs") + ["--epochs", "2"]
        return args, None
    model = value_of(args, "--model") or "mlp"
    args = without(without(args, "--epochs"), "--limit")
    limit = "64" if model == "gpt" else "512"
    if "--profile" in args:  # enough steps to reach the window's end
        until = int(value_of(args, "--profile").split(":")[1])
        limit = str((until + 1) * int(value_of(args, "--batch-size") or 128))
    args += ["--epochs", "1", "--limit", limit]
    if model == "gpt":
        args += GPT_SMALL
    out = work / f"{model}-{counter}"
    return args + ["--out", str(out)], (model, str(out))


counter = 0
for doc in docs:
    runs = {}
    for line, command, status in examples(doc):
        counter += 1
        args, trains = short(["ember"] + shlex.split(command)[1:], runs, counter)
        r = subprocess.run([ember] + args[1:], capture_output=True, text=True, timeout=600)
        where = f"{doc}:{line}: {command}"
        if r.returncode != status:
            failures.append(f"{where}\n  ran: {shlex.join(args)}\n  exit {r.returncode}, the docs say {status}"
                            f"\n  {(r.stderr or r.stdout).strip()[-400:]}")
        else:
            print(f"ok: {where} (exit {status})")
            if trains and status == 0:
                runs[trains[0]] = trains[1]

    # Every flag a table of this doc lists is one a command accepts.
    helps = ""
    for cmd in ["train", "eval", "generate", "lr-find", "max-batch", "plot", "bench", "profile", "diff"]:
        helps += subprocess.run([ember, cmd, "--help"], capture_output=True, text=True).stdout
    for n, row in enumerate(doc.read_text().splitlines(), 1):
        m = re.match(r"^\| `(--[a-z0-9-]+)", row)
        if m and not re.search(re.escape(m.group(1)) + r"(?![\w-])", helps):
            failures.append(f"{doc}:{n}: the table lists {m.group(1)}, which no command accepts")

if failures:
    print("\n".join("FAIL: " + f for f in failures))
    sys.exit(1)
print(f"docs examples: ok ({counter} commands)")
