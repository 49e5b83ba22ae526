"""Likely causes: rank the differences by how likely each is to have changed the results."""

from __future__ import annotations

from pathlib import PurePosixPath

from repro.compare import dataorder
from repro.diff.changes import change_phrase
from repro.diff.files import files_summary
from repro.diff.model import Cause, Change, Section
from repro.diff.setting_sections import overridden
from repro.facts.determinism import ledger_text
from repro.store.record import Record

# Cause ranks: lower is more likely. Changed inputs beat dependencies beat seeds beat
# determinism settings beat hardware; gaps leave room for finer categories.
RANK_DATA = 10
RANK_PARAMS = 20
RANK_CODE = 30
RANK_WORLD = 35
RANK_DATA_ORDER = 37  # observed, not a setting: after what would have changed it (data, code, world)
# Files earlier runs left in the working tree: read by few scripts, while another data order changes
# every step; the data order, when it differs, explains more.
RANK_LEFT = 39
RANK_DEPS = 40
RANK_SOFTWARE = 45
RANK_IMAGE = 48
RANK_SEEDS = 50
RANK_CONCURRENT = 55
RANK_DETERMINISM = 60
RANK_HARDWARE = 70
RANK_HARDWARE_STRICT = 80
RANK_NONDETERMINISM = 90


def rank_causes(
    sections: dict[str, Section],
    a: Record,
    b: Record,
    results_differ: bool,
    data_order: dataorder.DataOrderReport | None = None,
) -> list[Cause]:
    """Rank the differences by how likely each is to have changed the results (first = most likely).

    Called for identical results too: then the list is what changed without effect. The
    master seed of a script that seeds itself is never a cause (``overridden``). ``data_order``
    is what differs in the samples the DataLoaders yielded (`repro.compare.dataorder`).
    """
    causes = (
        _input_causes(sections)
        + _dependency_causes(sections)
        + _setting_causes(sections, a, b, results_differ)
    )
    causes += _environment_causes(sections["environment"], a, b)
    causes += _data_order_causes(data_order)
    if results_differ:
        causes += _concurrent_causes(sections["outputs"], a, b)
        causes += _runtime_causes(a, b)
    if results_differ and not causes:
        modes = {a.determinism.mode, b.determinism.mode}
        mode = a.determinism.mode if len(modes) == 1 else f"{a.determinism.mode}/{b.determinism.mode}"
        reason = f"no recorded difference — non-determinism under mode {mode}"
        if a.data.undeclared or b.data.undeclared:
            reason += "; or an undeclared input changed"
        causes.append(Cause("outputs", "nondeterminism", reason, RANK_NONDETERMINISM, []))
    causes.sort(key=lambda c: c.rank)
    return causes


def _concurrent_causes(outputs: Section, a: Record, b: Record) -> list[Cause]:
    """Outputs that differ and that more than one process of either run wrote at once."""
    shared = {s.path: s for s in [*a.results.shared_writes, *b.results.shared_writes]}
    differing = [c for c in outputs.changes if c.scope == "file" and c.kind == "changed" and c.key in shared]
    if not differing:
        return []
    shown = "; ".join(f"{c.key} by {shared[c.key].writers()}" for c in differing[:3])
    more = f" (+{len(differing) - 3} more)" if len(differing) > 3 else ""
    reason = f"written by more than one process at once: {shown}{more} (its bytes depend on which wrote last)"
    return [Cause("outputs", "concurrency", reason, RANK_CONCURRENT, _keys(differing))]


def _data_order_causes(report: dataorder.DataOrderReport | None) -> list[Cause]:
    """The DataLoaders yielded other samples, or seeded their workers otherwise."""
    causes = []
    if report is not None and report.order is not None:
        reason = dataorder.describe_order(report.order)
        causes.append(Cause("data", "data_order", reason, RANK_DATA_ORDER, []))
    if report is not None and report.worker_seeds is not None:
        reason = dataorder.describe_seeds(report.worker_seeds)
        causes.append(Cause("data", "data_order", reason, RANK_DATA_ORDER + 1, []))
    return causes


def _runtime_causes(a: Record, b: Record) -> list[Cause]:
    """Named nondeterminism: a run without the runtime, or nondeterministic ops that ran."""
    causes: list[Cause] = []
    unseeded = [r.id for r in (a, b) if r.determinism.applied is False]
    if unseeded:
        reason = f"the repro runtime did not load in {', '.join(unseeded)}: nothing was seeded or pinned"
        causes.append(Cause("determinism", "seed", reason, RANK_SEEDS - 1, []))
    for r in (a, b):
        ops = r.determinism.nondeterministic_ops
        if ops:
            why = "allowed" if r.determinism.allow_nondeterministic_ops else f"mode {r.determinism.mode}"
            reason = f"nondeterministic ops ran in {r.id} ({why}): {ledger_text(ops)}"
            causes.append(Cause("determinism", "nondeterminism", reason, RANK_NONDETERMINISM - 5, []))
            break
    return causes


def _keys(changes: list[Change], limit: int = 50) -> list[str]:
    return [c.key for c in changes[:limit]]


def _input_causes(sections: dict[str, Section]) -> list[Cause]:
    causes: list[Cause] = []
    data = sections["data"]
    if data.differs:
        causes.append(
            Cause("data", "input", f"data changed: {_data_reason(data)}", RANK_DATA, _keys(data.changes))
        )
    cmd = sections["command"]
    params = [c for c in cmd.changes if c.scope in ("param", "logged", "config")]
    if params:
        reason = f"hyper-parameters changed: {cmd.summary}"
        causes.append(Cause("command", "input", reason, RANK_PARAMS, _keys(params)))
    other = [c for c in cmd.changes if c.scope == "argv"]
    if other:
        reason = "command changed: " + ", ".join(change_phrase(c) for c in other)
        causes.append(Cause("command", "input", reason, RANK_PARAMS + 1, _keys(other)))
    code = sections["code"]
    earlier = [c for c in code.changes if c.scope == "left"]
    source = [c for c in code.changes if c.scope != "left"]
    if source:
        causes.append(Cause("code", "input", f"code changed: {code.summary}", RANK_CODE, _keys(source)))
    if earlier:
        reason = "files earlier runs left in the working tree differ: " + ", ".join(
            f"{c.key} ({c.detail})" for c in earlier[:3]
        )
        causes.append(Cause("code", "input", reason, RANK_LEFT, _keys(earlier)))
    world = [c for c in sections["environment"].changes if c.scope == "world"]
    if world:
        reason = (
            "world size changed: "
            + ", ".join(change_phrase(c) for c in world[:2])
            + " (data sharding, effective batch size)"
        )
        causes.append(Cause("environment", "input", reason, RANK_WORLD, _keys(world)))
    return causes


_IMAGE_INPUTS = ("image.base", "image.base_id", "image.dockerfile", "image.template")


def _dependency_causes(sections: dict[str, Section]) -> list[Cause]:
    causes: list[Cause] = []
    deps = sections["dependencies"]
    pkgs = [c for c in deps.changes if c.scope in ("lockfile", "installed")]
    image = [c for c in deps.changes if c.scope == "image"]
    if pkgs or any(c.key in _IMAGE_INPUTS for c in image):
        reason = f"dependencies changed: {deps.summary}"
        causes.append(Cause("dependencies", "dependency", reason, RANK_DEPS, _keys(deps.changes)))
    elif image:
        reason = "image differs with the same lockfile: " + ", ".join(c.key for c in image)
        causes.append(Cause("dependencies", "dependency", reason, RANK_IMAGE, _keys(image)))
    software = [c for c in sections["environment"].changes if c.scope == "software"]
    if software:
        reason = "software versions changed: " + ", ".join(change_phrase(c) for c in software)
        causes.append(Cause("environment", "dependency", reason, RANK_SOFTWARE, _keys(software)))
    return causes


def _setting_causes(sections: dict[str, Section], a: Record, b: Record, results_differ: bool) -> list[Cause]:
    causes: list[Cause] = []
    seeds = sections["seeds"]
    # A script that seeds itself overrides repro's seeds: only its own seed values can matter
    # (listed all the same among the differences without effect when the results are identical).
    moot = overridden(a, b) is not None and results_differ
    counted = [c for c in seeds.changes if c.scope == "script" or not moot]
    if counted:
        reason = "seed changed: " + (
            seeds.summary if len(counted) == len(seeds.changes) else ", ".join(map(change_phrase, counted))
        )
        causes.append(Cause("seeds", "seed", reason, RANK_SEEDS, _keys(counted)))
    det = sections["determinism"]
    if det.differs:
        reason = f"determinism settings changed: {det.summary}"
        causes.append(Cause("determinism", "determinism", reason, RANK_DETERMINISM, _keys(det.changes)))
    return causes


def _environment_causes(env: Section, a: Record, b: Record) -> list[Cause]:
    hardware = [c for c in env.changes if c.scope in ("hardware", "variable", "backend")]
    if not hardware:
        return []
    phrase = ", ".join(_hw_phrase(c) for c in hardware[:3])
    if len(hardware) > 3:
        phrase += f" (+{len(hardware) - 3} more)"
    if a.determinism.mode == "strict" and b.determinism.mode == "strict":
        reason = f"environment differs under strict mode (pinned, so unlikely): {phrase}"
        return [Cause("environment", "hardware", reason, RANK_HARDWARE_STRICT, _keys(hardware))]
    modes = "/".join(sorted({a.determinism.mode, b.determinism.mode}))
    reason = f"environment differs under mode {modes}: {phrase}"
    return [Cause("environment", "hardware", reason, RANK_HARDWARE, _keys(hardware))]


def _hw_phrase(c: Change) -> str:
    if c.key == "cpu_flags":
        return "CPU flags differ"
    return change_phrase(c)


def _data_reason(data: Section) -> str:
    files = [c for c in data.changes if c.scope == "file"]
    if not files:
        return data.summary
    dirs = sorted({g.dir for g in data.groups})
    where = f" in {dirs[0]}" if len(dirs) == 1 else f" in {len(dirs)} directories"
    named = ""
    if len(files) <= 3:
        kinds = {c.kind for c in files}
        names = [PurePosixPath(c.key).name if len(dirs) == 1 else c.key for c in files]
        if len(kinds) > 1:
            names = [f"{n} {c.kind}" for n, c in zip(names, files, strict=True)]
        named = ": " + ", ".join(names)
    return files_summary(files) + where + named
