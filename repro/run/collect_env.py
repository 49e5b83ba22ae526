"""The collect phase's environment: what the run's processes reported of themselves (interpreter,
torch, devices, world size, compiler) merged into the record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro.collect import produced
from repro.runtime import contract
from repro.store.record import Record


def _merge_process_env(record: Record, runtime: Path) -> None:
    env = produced.read_json(runtime, contract.ENV_FILE)
    if env:
        for key in ("python", "implementation", "torch", "cuda", "nccl"):
            if env.get(key):
                setattr(record.env, key, str(env[key]))
        if env.get("cudnn"):
            record.env.cudnn = str(env["cudnn"])
        if env.get("gpus"):
            record.env.gpus = env["gpus"]
        record.deps.freeze = list(env.get("freeze", []))
        record.deps.site_fingerprint = env.get("site_fingerprint")
    ranks = {
        rel.removesuffix(".json").split("rank")[-1]: produced.read_json(runtime, rel)
        for rel in produced.files(runtime, contract.ranked(contract.ENV_FILE, "*"))
    }
    if ranks or record.command.nproc_per_node > 1:
        world = ranks or {"0": env}
        record.env.world_size = max([int(v.get("world_size", 1)) for v in world.values() if v] or [1])
        record.env.rank_devices = {
            r: str(v.get("device", "cpu")) for r, v in sorted(world.items(), key=lambda kv: int(kv[0])) if v
        }
        for key in ("cuda", "nccl"):  # the launcher may not have imported what the ranks used
            value = next((v.get(key) for _, v in sorted(ranks.items()) if v.get(key)), None)
            if value and not getattr(record.env, key):
                setattr(record.env, key, str(value))
    knobs = produced.read_json(runtime, contract.ranked(contract.KNOBS_FILE, 0)) or produced.read_json(
        runtime, contract.KNOBS_FILE
    )
    if knobs:
        compiler = knobs.pop("compiler", None)  # recorded once, with the software (diff names its change)
        record.env.compiler = str(compiler) if compiler else record.env.compiler
        record.determinism.knobs.update(knobs)
        compile_warnings(record, compiler)


def compile_warnings(record: Record, compiler: Any) -> None:
    """The one line each for a compile whose autotuning a pinned mode turned off, and for a compile
    that found no C++ compiler."""
    turned_off = record.determinism.knobs.get("inductor_autotune_turned_off")
    if turned_off:
        record.warn(
            "compile_autotune_off",
            f"torch.compile asked for {', '.join(turned_off)} (autotuning by timing); mode "
            f"{record.determinism.mode} turned it off, so the compiled code is the same in every run "
            "(`--mode off` keeps it)",
        )
    if compiler == contract.NO_COMPILER:
        base = record.deps.image.base if record.deps.image else None
        where = f"the base image {base}" if base else "this environment"
        message = f"torch.compile needs a C++ compiler, and {where} has none"
        hint = (
            "use a base image with g++ and the Python headers (`repro base-image` makes one; "
            "`image.base` in repro.yaml), or set $CXX"
        )
        if record.results.status == "failed":
            record.results.failure = {"code": "no_compiler", "message": message, "hint": hint}
        else:
            record.warn("no_compiler", f"{message}: {hint}")
