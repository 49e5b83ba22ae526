"""The measuring checks: what --trace and gpu mode cost on the GPT (paired fresh-process runs in
alternating order, a bootstrap interval), and the CUDA image's pins against this machine's torch."""

from __future__ import annotations

import hashlib
import json
import re
import statistics
import tempfile
from pathlib import Path
from typing import Any

from .harness import REPO, Deadline, Lab, OverBudget, last_line, script
from .report import Outcome, bootstrap_ci

GPT = "train_gpt.py"
GPU = ["--backend", "local", "--gpus", "1", "--seed", "1234"]
STEPS = ["--max_iters", "150", "--warmup_iters", "10"]
Variant = tuple[str, list[str], list[str]]  # mode, repro run flags, script flags


def _timed(
    lab: Lab, root: Path, mode: str, flags: list[str], extra: list[str], deadline: Deadline
) -> dict[str, Any]:
    """One fresh `repro run` of the GPT: its seconds per step and the digest of the checkpoint it saved."""
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:  # outside the project: not an output
        timing = Path(tmp) / "timing.json"
        run = lab.repro_json(
            root,
            [
                "run",
                "--json",
                *GPU,
                "--mode",
                mode,
                *flags,
                "--",
                "python",
                GPT,
                *STEPS,
                *extra,
                "--timing",
                str(timing),
            ],
            deadline,
        )
        if run["_exit"] != 0 or not timing.exists():
            why = last_line(run["_stderr"])
            raise RuntimeError(
                f"repro run --mode {mode} {' '.join(flags + extra)} failed (exit {run['_exit']}): {why}"
            )
        seconds = float(json.loads(timing.read_text())["s_per_step"])
    ckpt = root / "out" / "ckpt.pt"
    return {"s_per_step": seconds, "ckpt": hashlib.sha256(ckpt.read_bytes()).hexdigest()[:16]}


def paired(
    lab: Lab,
    name: str,
    variants: dict[str, Variant],
    deadline: Deadline,
    min_rounds: int = 3,
) -> list[dict[str, dict[str, Any]]]:
    """Rounds of one fresh run per variant (name → mode, repro flags, script flags), the order rotated each
    round; as many rounds as the budget allows once ``min_rounds`` are in (at least two, at most 8). A
    round the budget cuts short is left out.

    Raises:
        OverBudget: the budget ran out before two rounds were in.
    """
    root = lab.project(name, {GPT: script("gpu_gpt.py")})
    names = list(variants)
    rounds: list[dict[str, dict[str, Any]]] = []
    per_round = 0.0
    while len(rounds) < 8:
        left = deadline.left()
        if len(rounds) >= 2 and (
            left < 1.2 * per_round or (len(rounds) >= min_rounds and left < 1.5 * per_round)
        ):
            break
        started = deadline.left()
        k = len(rounds) % len(names)
        order = names[k:] + names[:k]
        try:
            rounds.append(
                {v: {**_timed(lab, root, *variants[v], deadline), "position": i} for i, v in enumerate(order)}
            )
        except OverBudget:
            if len(rounds) < 2:
                raise
            break
        per_round = max(per_round, started - deadline.left())
    return rounds


def ratio_figure(rounds: list[dict[str, dict[str, Any]]], num: str, den: str) -> tuple[str, dict[str, Any]]:
    """``×1.08 [1.02, 1.15]``: the median per-round ratio of seconds per step, and its 95% bootstrap
    interval."""
    ratios = [r[num]["s_per_step"] / r[den]["s_per_step"] for r in rounds]
    lo, hi = bootstrap_ci(ratios)
    med = statistics.median(ratios)
    return f"×{med:.3f} [{lo:.3f}, {hi:.3f}]", {"ratios": ratios, "median": med, "ci95": [lo, hi]}


def _bit_exact(rounds: list[dict[str, dict[str, Any]]], variant: str) -> bool:
    return len({r[variant]["ckpt"] for r in rounds}) == 1


def trace_cost(lab: Lab, deadline: Deadline) -> Outcome:
    rounds = paired(lab, "trace", {"plain": ("gpu", [], []), "trace": ("gpu", ["--trace"], [])}, deadline, 2)
    fig, stats = ratio_figure(rounds, "trace", "plain")
    return (
        "finding",
        f"--trace per step {fig} ({len(rounds)} pairs)",
        {"trace_over_plain": stats, "rounds": rounds},
    )


def price(lab: Lab, deadline: Deadline) -> Outcome:
    variants: dict[str, Variant] = {
        "off": ("off", [], []),
        "gpu": ("gpu", [], []),
        "gpu_nofill": ("gpu", [], ["--no-fill"]),
    }
    rounds = paired(lab, "price", variants, deadline)
    gpu_fig, gpu_stats = ratio_figure(rounds, "gpu", "off")
    nofill_fig, nofill_stats = ratio_figure(rounds, "gpu_nofill", "off")
    exact = {v: _bit_exact(rounds, v) for v in ("gpu", "gpu_nofill")}
    figure = (
        f"gpu/off {gpu_fig}; gpu with fill_uninitialized_memory off/off {nofill_fig} ({len(rounds)} rounds); "
        f"bit-exact across rounds: fill on {'yes' if exact['gpu'] else 'NO'}, "
        f"fill off {'yes' if exact['gpu_nofill'] else 'NO'}"
    )
    details = {
        "gpu_over_off": gpu_stats,
        "nofill_over_off": nofill_stats,
        "bit_exact": exact,
        "rounds": rounds,
    }
    return "finding", figure, details


_INDEX_CUDA = re.compile(r"/cu(\d+)(\d)/?$")


def image_pins(lab: Lab) -> Outcome:
    """The torch and CUDA the recipe's CUDA image pins (its cuda lock, else requirements.in and the default
    cuda.index) against what this machine's torch reports; a mismatch is named, not fixed."""
    facts = lab.facts
    recipe = REPO / "recipes" / "ddp-gpu"
    lock = recipe / "lockfiles" / "requirements-cuda.lock.txt"
    if lock.exists():
        from repro.facts.cudawheels import cuda_build

        lines = [s.strip().rstrip("\\").strip() for s in lock.read_text().splitlines() if "==" in s]
        torch_pin = next((s.split("==")[1] for s in lines if s.lower().startswith("torch==")), "?")
        build = cuda_build(lines)
        cuda, source = (build.version if build else "?"), str(lock.relative_to(REPO))
    else:
        from repro.facts.lockvariants import CUDA_INDEX

        req = (recipe / "requirements.in").read_text()
        torch_pin = next((s.split("==")[1].strip() for s in req.splitlines() if s.startswith("torch==")), "?")
        m = _INDEX_CUDA.search(CUDA_INDEX)
        cuda = f"{m.group(1)}.{m.group(2)}" if m else "?"
        source = f"recipes/ddp-gpu/requirements.in + cuda.index {CUDA_INDEX}"
    here_torch, here_cuda = str(facts.get("torch")), str(facts.get("cuda"))
    differs = [
        w for w, a, b in (("torch", torch_pin, here_torch.split("+")[0]), ("CUDA", cuda, here_cuda)) if a != b
    ]
    figure = f"image torch {torch_pin} / CUDA {cuda} ({source}); here torch {here_torch} / CUDA {here_cuda}"
    if differs:
        figure += f": {' and '.join(differs)} differ"
    return (
        ("fail" if differs else "pass"),
        figure,
        {"image": {"torch": torch_pin, "cuda": cuda}, "source": source},
    )
