"""One function per GPU claim of the README (each tagged there ``[gpu-check: NAME]``), in the order
they run, each with its share of the 8-minute budget. A check returns its status, its figure and
details; `main` times it, catches what it raises and writes the row."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import measure
from .harness import REPO, Deadline, Lab, last_line, script
from .report import Outcome

GPU = ["--backend", "local", "--gpus", "1", "--mode", "gpu", "--seed", "1234"]
GPT = "train_gpt.py"
NONDET_OP = "adaptive_avg_pool2d"  # gpu_nondet.py's op with no deterministic CUDA kernel (its backward)


@dataclass(frozen=True)
class Check:
    name: str
    title: str
    budget_s: int
    fn: Callable[[Lab, Deadline, int], Outcome]
    min_gpus: int = 1


def _run_and_replay(
    lab: Lab,
    name: str,
    files: dict[str, str],
    command: list[str],
    deadline: Deadline,
    run_args: tuple[str, ...] = (),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`repro run` then `repro replay` of it in a fresh project: both --json answers."""
    root = lab.project(name, files)
    run = lab.repro_json(root, ["run", "--json", *GPU, *run_args, "--", *command], deadline)
    if run["_exit"] != 0:
        return run, {}
    return run, lab.repro_json(root, ["replay", str(run.get("id")), "--json", "--backend", "local"], deadline)


def _identical(lab: Lab, name: str, script_name: str, args: list[str], deadline: Deadline) -> Outcome:
    run, replay = _run_and_replay(
        lab, name, {script_name: script(script_name)}, ["python", script_name, *args], deadline
    )
    if run["_exit"] != 0:
        return "fail", f"run failed (exit {run['_exit']}): {last_line(run['_stderr'])}", {"run": run}
    status = replay.get("status")
    outputs = {o["path"]: o["status"] for o in replay.get("outputs", [])}
    figure = f"replay {status}; outputs {', '.join(f'{p} {s}' for p, s in outputs.items()) or 'none'}"
    ok = status == "identical" and outputs and all(s == "same" for s in outputs.values())
    return ("pass" if ok else "fail"), figure, {"run_id": run.get("id"), "replay": _brief(replay)}


def gpu_mode_cnn(lab: Lab, deadline: Deadline, gpus: int) -> Outcome:
    return _identical(lab, "cnn", "gpu_cnn.py", ["--workers", "2"], deadline)


def gpu_mode_gpt(lab: Lab, deadline: Deadline, gpus: int) -> Outcome:
    return _identical(lab, "gpt", "gpu_gpt.py", [], deadline)


def gpu_mode_scatter(lab: Lab, deadline: Deadline, gpus: int) -> Outcome:
    return _identical(lab, "scatter", "gpu_scatter.py", [], deadline)


def ledger(lab: Lab, deadline: Deadline, gpus: int) -> Outcome:
    """Refused by default naming the op; allowed: counted in the record, replay within tolerance."""
    root = lab.project("ledger", {"train.py": script("gpu_nondet.py")})
    refused = lab.repro_json(root, ["run", "--json", *GPU, "--", "python", "train.py"], deadline)
    named = NONDET_OP in refused["_stderr"]
    allowed = lab.repro_json(
        root, ["run", "--json", *GPU, "--allow-nondeterministic-ops", "--", "python", "train.py"], deadline
    )
    if allowed["_exit"] != 0:
        return "fail", f"allowed run failed (exit {allowed['_exit']}): {last_line(allowed['_stderr'])}", {}
    record = lab.repro_json(root, ["show", str(allowed.get("id")), "--json"], deadline)
    ops = record.get("determinism", {}).get("nondeterministic_ops") or []
    counted = [(o.get("op"), o.get("count")) for o in ops if NONDET_OP in str(o.get("op"))]
    replay = lab.repro_json(
        root, ["replay", str(allowed.get("id")), "--json", "--backend", "local"], deadline
    )
    figure = (
        f"default: exit {refused['_exit']}, op {'named' if named else 'NOT named'}; allowed: ledger "
        f"{counted or 'empty'}; replay {replay.get('status')}"
    )
    said = next((s for s in refused["_stderr"].splitlines() if NONDET_OP in s), "")
    details = {"refused_stderr": said.strip(), "ledger": ops, "replay": _brief(replay)}
    if not (refused["_exit"] == 4 and named and counted and replay.get("mode") in ("gpu", "off")):
        return "fail", figure, details
    if replay.get("status") == "identical":  # held to a tolerance; the bits happened to match this time
        return "finding", figure + " (held to gpu tolerance; the bits matched this time)", details
    return ("pass" if replay.get("status") == "within_tolerance" else "fail"), figure, details


def ops_cuda(lab: Lab, deadline: Deadline, gpus: int) -> Outcome:
    """--ops on CUDA: the op made nondeterministic on purpose is named by op, module and line."""
    text = script("gpu_gpt.py")
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "# forced diff" in s)
    cmd = ["python", GPT, "--jitter", "--max_iters", "4", "--warmup_iters", "0"]
    run, replay = _run_and_replay(lab, "ops", {GPT: text}, cmd, deadline, ("--ops",))
    if run["_exit"] != 0:
        return "fail", f"run failed (exit {run['_exit']}): {last_line(run['_stderr'])}", {}
    first = next(
        (r.get("fields", {}) for r in replay.get("reasons", []) if r.get("code") == "op_differs"), None
    )
    if first is None:
        return (
            "fail",
            f"replay {replay.get('status')} named no op (ops_compared {replay.get('ops_compared')})",
            {"replay": _brief(replay)},
        )
    where = str(first.get("where"))
    figure = f"{first.get('op')} in {first.get('module')} at {where} (expected {GPT}:{line}, module *.mlp)"
    ok = where.endswith(f"{GPT}:{line}") and "mlp" in str(first.get("module"))
    return ("pass" if ok else "fail"), figure, {"op_differs": first}


def trace_cost(lab: Lab, deadline: Deadline, gpus: int) -> Outcome:
    """--trace on CUDA: the GPT's time per step with it over without it, paired fresh processes."""
    return measure.trace_cost(lab, deadline)


def nccl_two_gpus(lab: Lab, deadline: Deadline, gpus: int) -> Outcome:
    """torchrun --nproc_per_node=2 over NCCL in gpu mode: replay identical, NCCL pins recorded."""
    recipe = REPO / "recipes" / "ddp-gpu"
    files = {
        "train_ddp.py": (recipe / "train_ddp.py").read_text(),
        "repro.yaml": (recipe / "repro.yaml").read_text(),
        "data/points.csv": (recipe / "data" / "points.csv").read_text(),
    }
    root = lab.project("nccl", files)
    args = ["run", "--json", "--backend", "local", "--gpus", "all", "--nproc-per-node", "2", "--mode", "gpu"]
    run = lab.repro_json(root, [*args, "--", "python", "train_ddp.py"], deadline)
    if run["_exit"] != 0:
        return "fail", f"run failed (exit {run['_exit']}): {last_line(run['_stderr'])}", {}
    det = lab.repro_json(root, ["show", str(run.get("id")), "--json"], deadline).get("determinism", {})
    nccl = {k: v for k, v in (det.get("env") or {}).items() if k.startswith("NCCL_")}
    replay = lab.repro_json(root, ["replay", str(run.get("id")), "--json", "--backend", "local"], deadline)
    pins = nccl or "no NCCL pins"
    figure = f"world size {run.get('world_size')}, replay {replay.get('status')}, recorded {pins}"
    ok = replay.get("status") == "identical" and {"NCCL_ALGO", "NCCL_PROTO"} <= set(nccl)
    return ("pass" if ok else "fail"), figure, {"nccl": nccl, "replay": _brief(replay)}


def compile_gpt(lab: Lab, deadline: Deadline, gpus: int) -> Outcome:
    """torch.compile in gpu mode: run + replay; whether the bits match is a finding either way."""
    cmd = ["python", GPT, "--compile", "--n_layer", "2", "--max_iters", "20", "--warmup_iters", "2"]
    run, replay = _run_and_replay(lab, "compile", {GPT: script("gpu_gpt.py")}, cmd, deadline)
    if run["_exit"] != 0:
        return "fail", f"compiled run failed (exit {run['_exit']}): {last_line(run['_stderr'])}", {}
    status = replay.get("status")
    if status not in ("identical", "within_tolerance", "diverged"):
        return "fail", f"replay {status}: {last_line(replay.get('_stderr', ''))}", {"replay": _brief(replay)}
    figure = f"replay {status}" + (
        f", max abs {replay.get('max_abs')}" if status != "identical" else ": bits match"
    )
    return "finding", figure, {"replay": _brief(replay)}


def price_gpt(lab: Lab, deadline: Deadline, gpus: int) -> Outcome:
    """gpu mode against off on the GPT, fill_uninitialized_memory on and off (paired, bootstrap)."""
    return measure.price(lab, deadline)


def cuda_image_pins(lab: Lab, deadline: Deadline, gpus: int) -> Outcome:
    """The CUDA image's pinned torch and CUDA (recipes/ddp-gpu) against this machine's torch."""
    return measure.image_pins(lab)


def _brief(replay: dict[str, Any]) -> dict[str, Any]:
    keep = ("status", "mode", "max_abs", "summary", "reasons", "notes", "ops_compared")
    return {k: replay.get(k) for k in keep if k in replay} | {"exit": replay.get("_exit")}


# In the order they run: the cheap pins first, the measurements that use what is left last.
CHECKS: tuple[Check, ...] = (
    Check("cuda-image-pins", "the CUDA image's pinned torch/CUDA against this machine's", 5, cuda_image_pins),
    Check(
        "gpu-mode-cnn", "--mode gpu run + replay identical: CNN, DataLoader with 2 workers", 40, gpu_mode_cnn
    ),
    Check(
        "gpu-mode-gpt", "--mode gpu run + replay identical: nanoGPT-shaped GPT, AdamW, bf16", 40, gpu_mode_gpt
    ),
    Check(
        "gpu-mode-scatter", "--mode gpu run + replay identical: index_add_/scatter_add_", 35, gpu_mode_scatter
    ),
    Check(
        "ledger",
        "no deterministic CUDA kernel: refused naming the op; allowed: counted, tolerance",
        50,
        ledger,
    ),
    Check("ops-cuda", "--ops on CUDA names a forced difference by op, module and line", 45, ops_cuda),
    Check("trace-cost", "--trace on CUDA: GPT time per step with --trace over without", 45, trace_cost),
    Check(
        "nccl-2gpu",
        "torchrun 2 ranks, NCCL, gpu mode: replay identical, NCCL pins recorded",
        45,
        nccl_two_gpus,
        2,
    ),
    Check(
        "compile-gpt",
        "torch.compile in gpu mode on the GPT: run + replay, bits match or not",
        70,
        compile_gpt,
    ),
    Check(
        "price-gpt",
        "gpu mode vs off on the GPT, fill_uninitialized_memory on/off, bootstrap CI",
        85,
        price_gpt,
    ),
)
TOTAL_BUDGET_S = 480
