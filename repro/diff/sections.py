"""One function per section of a diff: each compares one part of two records into a `Section`."""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path
from typing import Any

from repro.backends import registry
from repro.compare.outputs import OutputDiff, Outputs, compare_outputs
from repro.compare.tensors import TensorReport
from repro.compare.tolerance import STRICT
from repro.diff.changes import change_phrase, dict_changes, fmt_value, scalar
from repro.diff.files import (
    MAX_GROUPS,
    add_line_counts,
    file_changes,
    file_patch,
    files_summary,
    group_by_dir,
)
from repro.diff.metrics import divergences, metric_rows, series
from repro.diff.model import Change, Section, TensorChange, TensorFileChange
from repro.diff.patches import patch_changes
from repro.diff.reader import OpenBlob, SafeReader
from repro.diff.versions import compare_versions, parse_pins
from repro.errors import CapsuleInvalid
from repro.facts import hydra
from repro.store.record import DataInput, FileEntry, Record
from repro.units import human_bytes, plural

# --------------------------------------------------------------------------- command


_FLAG = re.compile(r"^--?([A-Za-z_][\w.-]*)(=.*)?$")


def _param_name(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _argv_skeleton(argv: list[str], params: dict[str, Any]) -> list[str]:
    """argv with the hyper-parameter flags and values taken out, to see changes params do not explain."""
    out: list[str] = []
    skip = False
    for i, token in enumerate(argv):
        if skip:
            skip = False
            continue
        m = _FLAG.match(token)
        if m and _param_name(m.group(1)) in params:
            if m.group(2) is None and i + 1 < len(argv) and not _FLAG.match(argv[i + 1]):
                skip = True
            continue
        out.append(token)
    return out


def diff_command(a: Record, b: Record, read: SafeReader) -> Section:
    """The command section: hyper-parameters, logged params, argv, cwd and config files."""
    ca, cb = a.command, b.command
    changes = dict_changes(ca.params, cb.params, "param")
    changes += dict_changes(a.results.params, b.results.params, "logged", prefix="logged:")
    # A flag added or removed is a hyper-parameter row already: the skeleton leaves out both sides' flags.
    both = {**ca.params, **cb.params}
    skel_a = _argv_skeleton(ca.argv, both)
    skel_b = _argv_skeleton(cb.argv, both)
    if skel_a != skel_b:
        changes.append(
            Change(key="argv", kind="changed", scope="argv", old=shlex.join(ca.argv), new=shlex.join(cb.argv))
        )
    changes += scalar("cwd", ca.cwd, cb.cwd, "argv")
    changes += scalar("nproc_per_node", ca.nproc_per_node, cb.nproc_per_node, "argv")
    for c in file_changes(ca.config_files, cb.config_files, "config"):
        add_line_counts(c, ca.config_files, cb.config_files, read)
        changes.append(c)
    params = [c for c in changes if c.scope in ("param", "logged", "config")]
    summary = ", ".join(change_phrase(c) for c in params[:6])
    if len(params) > 6:
        summary += f" (+{len(params) - 6} more)"
    if not summary and changes:
        summary = "command line changed"
    return Section(name="", title="", changes=changes, summary=summary)


# --------------------------------------------------------------------------- code


def diff_code(a: Record, b: Record, read: SafeReader, with_patch: bool) -> Section:
    """The code section: git facts, changed files or the uncommitted patch, and their diff if asked."""
    ca, cb = a.code, b.code
    changes: list[Change] = []
    notes: list[str] = []
    patches: list[str] = []
    changes += scalar("kind", ca.kind, cb.kind, "git")
    changes += scalar("commit", ca.commit, cb.commit, "git")
    changes += scalar("branch", ca.branch, cb.branch, "git")
    changes += scalar("remote", ca.remote, cb.remote, "git")
    changes += scalar("dirty", ca.dirty, cb.dirty, "git")
    if ca.commit and cb.commit and ca.commit != cb.commit and not (ca.files and cb.files):
        notes.append(f"files changed between the commits: git diff --stat {ca.commit[:12]} {cb.commit[:12]}")

    # Recorded file contents say everything the patch and the untracked list say, once per file.
    recorded = bool(ca.files or cb.files)
    scopes = [("file", ca.files, cb.files)] if recorded else [("untracked", ca.untracked, cb.untracked)]
    for scope, fa, fb in scopes:
        for c in file_changes(fa, fb, scope):
            add_line_counts(c, fa, fb, read)
            changes.append(c)
            if with_patch:
                patches.append(file_patch(c, fa, fb, read))

    if ca.patch != cb.patch and not recorded:
        pa, pb = read.text(ca.patch), read.text(cb.patch)
        if (ca.patch and pa is None) or (cb.patch and pb is None):
            changes.append(
                Change(
                    key="(uncommitted patch)",
                    kind="changed",
                    scope="patch",
                    detail="uncommitted changes differ (patch not available)",
                )
            )
        else:
            changes += patch_changes(pa or "", pb or "", patches if with_patch else None)

    # Files an earlier run wrote (a model.pt left in the working directory) are outputs, not code.
    left = {**ca.earlier_outputs, **cb.earlier_outputs}
    changes += [c for c in file_changes(ca.listed, cb.listed, "file") if c.key in left]
    for c in changes:
        if c.scope in ("file", "untracked") and c.key in left:
            c.scope, c.detail = "left", f"written by run {left[c.key]}"
    if [c.key for c in changes] == ["dirty"]:
        # The flag alone, with identical commit, patch and files, does not change what ran:
        # files outside the captured code (declared data, outputs) make git report dirty.
        side = "B" if cb.dirty else "A"
        notes.append(f"working tree marked dirty only in {side}; the recorded code is identical")
        changes = []
    files = [c for c in changes if c.scope in ("file", "untracked", "patch")]
    parts = []
    commit = next((c for c in changes if c.key == "commit"), None)
    if commit:
        parts.append(f"commit {_short(commit.old)} → {_short(commit.new)}")
    if files:
        plus = sum(c.lines[0] for c in files if c.lines)
        minus = sum(c.lines[1] for c in files if c.lines)
        parts.append(f"{plural(len(files), 'file')} changed (+{plus} −{minus})")
    elif any(c.key == "dirty" for c in changes):
        parts.append("working tree " + ("dirty" if cb.dirty else "clean") + " in B")
    earlier = [c for c in changes if c.scope == "left"]
    if earlier:
        parts.append(f"{plural(len(earlier), 'file')} earlier runs wrote")
    summary = ", ".join(parts) or ("code changed" if changes else "")
    patch = "".join(patches) if with_patch and patches else None
    return Section(
        name="",
        title="",
        changes=changes,
        summary=summary,
        groups=group_by_dir(files) if len(files) > MAX_GROUPS else [],
        patch=patch,
        notes=notes,
    )


def _short(value: Any) -> str:
    return str(value)[:12] if value else "—"


# --------------------------------------------------------------------------- data


def _entries(item: DataInput, read: SafeReader | None) -> list[FileEntry]:
    """An input's files; empty when its manifest blob cannot be read (the digest still differs)."""
    try:
        return item.entries(read or (lambda digest: None))
    except CapsuleInvalid:
        return []


def diff_data(a: Record, b: Record, read: SafeReader | None = None) -> Section:
    """The data section: declared inputs by digest and file (large manifests read through
    ``read``), and undeclared inputs."""
    ia = {i.path: i for i in a.data.inputs}
    ib = {i.path: i for i in b.data.inputs}
    changes: list[Change] = []
    changed_files: list[Change] = []
    for path in sorted(set(ia) | set(ib)):
        x, y = ia.get(path), ib.get(path)
        if y is None:
            assert x is not None
            changes.append(
                Change(
                    key=path,
                    kind="removed",
                    scope="input",
                    old=x.size,
                    detail=f"{plural(x.count or len(x.files), 'file')}, {human_bytes(x.size)}",
                )
            )
        elif x is None:
            changes.append(
                Change(
                    key=path,
                    kind="added",
                    scope="input",
                    new=y.size,
                    detail=f"{plural(y.count or len(y.files), 'file')}, {human_bytes(y.size)}",
                )
            )
        elif x.digest != y.digest:
            found = file_changes(_entries(x, read), _entries(y, read), "file")
            if not found:
                changes.append(
                    Change(
                        key=path,
                        kind="changed",
                        scope="input",
                        old=x.digest,
                        new=y.digest,
                        detail="directory digest changed",
                    )
                )
            changed_files += found
    changes += changed_files
    # Files read and not declared are compared above as inputs where the run recorded them (hashed);
    # the others (a record from before, a credential-looking file) only by name.
    undeclared_a, undeclared_b = set(a.data.undeclared) - set(ia), set(b.data.undeclared) - set(ib)
    for path in sorted(undeclared_b - undeclared_a):
        changes.append(Change(key=path, kind="added", scope="undeclared", detail="read but not declared"))
    for path in sorted(undeclared_a - undeclared_b):
        changes.append(Change(key=path, kind="removed", scope="undeclared", detail="read but not declared"))
    notes = []
    if undeclared_a or undeclared_b:
        notes.append(f"undeclared inputs (read, not hashed): A {len(undeclared_a)}, B {len(undeclared_b)}")
    inputs = [c for c in changes if c.scope == "input"]
    parts = [files_summary(changed_files)] if changed_files else []
    parts += [f"input {c.key} {c.kind}" for c in inputs]
    summary = ", ".join(p for p in parts if p)
    if not summary and changes:
        summary = "undeclared inputs differ"
    return Section(
        name="", title="", changes=changes, summary=summary, groups=group_by_dir(changed_files), notes=notes
    )


# --------------------------------------------------------------------------- dependencies


def _pin_changes(a: dict[str, str], b: dict[str, str], scope: str) -> list[Change]:
    changes: list[Change] = []
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name), b.get(name)
        if x == y:
            continue
        if x is None:
            changes.append(Change(key=name, kind="added", scope=scope, new=y))
        elif y is None:
            changes.append(Change(key=name, kind="removed", scope=scope, old=x))
        else:
            order = compare_versions(x, y)
            kind = "upgraded" if order < 0 else "downgraded" if order > 0 else "changed"
            changes.append(Change(key=name, kind=kind, scope=scope, old=x, new=y))
    return changes


def _lock_pins(r: Record, read: SafeReader) -> dict[str, str]:
    if r.deps.requirements:
        return parse_pins(r.deps.requirements)
    text = read.text(r.deps.lock_blob)
    return parse_pins(text.splitlines()) if text else {}


def diff_deps(a: Record, b: Record, read: SafeReader) -> Section:
    """The dependencies section: lockfile pins, installed packages and the image."""
    da, db = a.deps, b.deps
    changes = _pin_changes(_lock_pins(a, read), _lock_pins(b, read), "lockfile")
    if not changes and da.lock_blob != db.lock_blob and da.lock_blob and db.lock_blob:
        changes.append(
            Change(
                key="(lockfile)",
                kind="changed",
                scope="lockfile",
                detail="lockfile content differs (hashes or markers)",
            )
        )
    seen = {(c.key, c.kind, c.old, c.new) for c in changes}
    installed_a, installed_b = parse_pins(da.freeze), parse_pins(db.freeze)
    kind_a, kind_b = _environment_kind(a), _environment_kind(b)
    if kind_a != kind_b and installed_a and installed_b:
        changes.append(_environment_change(kind_a, kind_b, installed_a, installed_b))
        # what else a host interpreter and an image hold is not comparable: only their common packages
        installed_a = {k: v for k, v in installed_a.items() if k in installed_b}
        installed_b = {k: v for k, v in installed_b.items() if k in installed_a}
    for c in _pin_changes(installed_a, installed_b, "installed"):
        if (c.key, c.kind, c.old, c.new) not in seen:
            changes.append(c)
    changes += scalar("lockfile path", da.lockfile, db.lockfile, "lockfile")
    if da.site_fingerprint and db.site_fingerprint and kind_a == kind_b:
        changes += scalar("site-packages fingerprint", da.site_fingerprint, db.site_fingerprint, "installed")
    ia, ib = da.image, db.image
    if ia is not None or ib is not None:
        for attr in ("base", "base_id", "template", "tag", "id"):
            changes += scalar(f"image.{attr}", getattr(ia, attr, None), getattr(ib, attr, None), "image")
        if ia is not None and ib is not None and ia.dockerfile != ib.dockerfile:
            changes.append(
                Change(
                    key="image.dockerfile",
                    kind="changed",
                    scope="image",
                    detail="rendered Dockerfile differs",
                )
            )
    pkgs = [
        c
        for c in changes
        if c.scope in ("lockfile", "installed") and " " not in c.key and not c.key.startswith("(")
    ]
    parts = [f"environment changed: {c.old} vs {c.new}" for c in changes if c.key == ENVIRONMENT_KEY]
    parts += [_pkg_phrase(c) for c in pkgs[:4]]
    if len(pkgs) > 4:
        parts.append(f"+{len(pkgs) - 4} more")
    if any(c.scope == "image" and c.key in ("image.base", "image.base_id") for c in changes):
        parts.append("base image changed")
    elif any(c.scope == "image" for c in changes):
        parts.append("image differs")
    summary = ", ".join(parts) or ("dependencies changed" if changes else "")
    return Section(name="", title="", changes=changes, summary=summary)


ENVIRONMENT_KEY = "(environment)"  # a host interpreter on one side, an image on the other


def _environment_kind(r: Record) -> str:
    """Where a run's packages were installed: an image it ran in, or the host's interpreter (the local
    backend; a replay on it keeps the image its original named)."""
    local = registry.in_place(r.backend.name) or r.deps.image is None or not r.deps.image.id
    return "host interpreter" if local else "image"


def _environment_change(kind_a: str, kind_b: str, a: dict[str, str], b: dict[str, str]) -> Change:
    one_side = len(set(a) ^ set(b))
    return Change(
        key=ENVIRONMENT_KEY,
        kind="changed",
        scope="installed",
        old=kind_a,
        new=kind_b,
        detail=f"{one_side} packages installed on one side only, not compared" if one_side else None,
    )


def _pkg_phrase(c: Change) -> str:
    if c.kind == "added":
        return f"{c.key} {c.new} added"
    if c.kind == "removed":
        return f"{c.key} {c.old} removed"
    return f"{c.key} {c.old} → {c.new}"


# --------------------------------------------------------------------------- seeds, determinism


def script_seed_phrase(r: Record) -> str | None:
    """``torch.manual_seed(1337)`` (and how many more) for a script that seeded itself, else None."""
    seeds = r.seeds.script_seeds
    if not seeds:
        return None
    first = seeds[0]
    more = f" and {len(seeds) - 1} more" if len(seeds) > 1 else ""
    return f"{first.get('api')}({first.get('value')!r}){more}"


def overridden(a: Record, b: Record) -> str | None:
    """Why the master seed has no effect: the script's own seeding, as a phrase; None when it counts."""
    phrase = script_seed_phrase(a) or script_seed_phrase(b)
    return f"overridden by the script ({phrase})" if phrase else None


def _script_seed_values(r: Record) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for s in r.seeds.script_seeds:
        values.setdefault(f"script {s.get('api')}", s.get("value"))
    return values


def diff_seeds(a: Record, b: Record) -> Section:
    """The seeds section: master seed, derived and per-rank seeds, and the seeds the script set itself.

    How the master seed was chosen (drawn or given) is not a difference when its value is the
    same. When either script seeds its RNGs itself, repro's master seed is overridden: the
    master row says so, and the script's own seed values are compared instead.
    """
    sa, sb = a.seeds, b.seeds
    notes: list[str] = []
    why = overridden(a, b)
    changes = scalar("master", sa.master, sb.master, "seed")
    changes += scalar("PYTHONHASHSEED", sa.pythonhashseed, sb.pythonhashseed, "seed")
    if not changes or changes[0].key != "master":
        changes += dict_changes(sa.derived, sb.derived, "derived")
        flat_a = {f"rank{r}.{k}": v for r, d in sa.per_rank.items() for k, v in d.items()}
        flat_b = {f"rank{r}.{k}": v for r, d in sb.per_rank.items() for k, v in d.items()}
        changes += dict_changes(flat_a, flat_b, "derived")
    if why:
        for c in changes:
            if c.scope in ("seed", "derived") and c.key != "PYTHONHASHSEED":
                c.detail = why
        notes.append(f"repro's master seed is {why}")
    changes += dict_changes(_script_seed_values(a), _script_seed_values(b), "script")
    if sa.drawn != sb.drawn and sa.master == sb.master:
        notes.append(f"seed {sa.master} in both ({'drawn' if sa.drawn else 'given'} in A, "
                     f"{'drawn' if sb.drawn else 'given'} in B)")  # fmt: skip
    master = next((c for c in changes if c.key == "master"), None)
    script = [c for c in changes if c.scope == "script"]
    parts = []
    if master:
        parts.append(_master_phrase(master.old, sa.drawn, master.new, sb.drawn))
        if why:
            parts[-1] += f", {why}"
    parts += [change_phrase(c) for c in script]
    if not parts:
        parts = [f"{c.key} {fmt_value(c.old)} → {fmt_value(c.new)}" for c in changes[:3]]
    return Section(name="", title="", changes=changes, summary=", ".join(parts), notes=notes)


def _master_phrase(old: object, old_drawn: bool, new: object, new_drawn: bool) -> str:
    """``seed 1234 → 5``, saying which side's seed was drawn: a given seed is never called drawn."""
    if old_drawn and new_drawn:
        return f"seed {old} → {new} (both drawn)"
    if old_drawn or new_drawn:
        how = ("drawn", "given") if old_drawn else ("given", "drawn")
        return f"seed {old} ({how[0]}) → {new} ({how[1]})"
    return f"seed {old} → {new}"


def diff_determinism(a: Record, b: Record) -> Section:
    """The determinism section: mode, threads, ISA, knobs and environment variables."""
    da, db = a.determinism, b.determinism
    changes = scalar("mode", da.mode, db.mode, "mode")
    changes += scalar("threads", da.threads, db.threads, "knob")
    changes += scalar("isa", da.isa, db.isa, "knob")
    shown = {"mode", "threads", "isa"}  # recorded both as fields and as knobs: one row each
    knobs_a = {k: v for k, v in da.knobs.items() if k not in shown}
    knobs_b = {k: v for k, v in db.knobs.items() if k not in shown}
    changes += dict_changes(knobs_a, knobs_b, "knob")
    changes += dict_changes(da.env, db.env, "env")
    summary = ", ".join(change_phrase(c) for c in changes[:4])
    if len(changes) > 4:
        summary += f" (+{len(changes) - 4} more)"
    return Section(name="", title="", changes=changes, summary=summary)


# --------------------------------------------------------------------------- environment

_SOFTWARE = ("python", "implementation", "torch", "cuda", "cudnn", "nccl", "compiler")
_HARDWARE = ("os", "machine", "cpu_model", "cpu_count", "driver")


def _gpu_summary(gpus: list[dict[str, Any]]) -> str | None:
    if not gpus:
        return None
    names: dict[str, int] = {}
    for g in gpus:
        name = str(g.get("name") or g.get("model") or "GPU")
        names[name] = names.get(name, 0) + 1
    return ", ".join(f"{n}× {name}" for name, n in names.items())


def diff_env(a: Record, b: Record) -> Section:
    """The environment section: software versions, hardware, world size, variables and backend."""
    ea, eb = a.env, b.env
    changes: list[Change] = []
    for attr in _SOFTWARE:
        changes += scalar(attr, getattr(ea, attr), getattr(eb, attr), "software")
    for attr in _HARDWARE:
        changes += scalar(attr, getattr(ea, attr), getattr(eb, attr), "hardware")
    changes += scalar("gpus", _gpu_summary(ea.gpus), _gpu_summary(eb.gpus), "hardware")
    fa, fb = set(ea.cpu_flags), set(eb.cpu_flags)
    if fa != fb and fa and fb:
        only_a, only_b = sorted(fa - fb), sorted(fb - fa)
        changes.append(
            Change(
                key="cpu_flags",
                kind="changed",
                scope="hardware",
                old=only_a,
                new=only_b,
                detail=f"{len(only_a)} only in A, {len(only_b)} only in B",
            )
        )
    changes += scalar("world_size", ea.world_size, eb.world_size, "world")
    changes += dict_changes(ea.rank_devices, eb.rank_devices, "world", prefix="rank_device:")
    changes += dict_changes(ea.variables, eb.variables, "variable", prefix="$")
    changes += scalar("backend", a.backend.name, b.backend.name, "backend")
    summary = ", ".join(change_phrase(c) if c.key != "cpu_flags" else "CPU flags differ" for c in changes[:4])
    if len(changes) > 4:
        summary += f" (+{len(changes) - 4} more)"
    return Section(name="", title="", changes=changes, summary=summary)


# --------------------------------------------------------------------------- metrics


def diff_metrics(a: Record, b: Record, read: SafeReader) -> Section:
    """The metrics section: final metrics, series present on one side, and the first divergence."""
    fa, fb = a.results.final_metrics, b.results.final_metrics
    changes = dict_changes(fa, fb, "final")
    rows_a = metric_rows(a, read)
    rows_b = metric_rows(b, read)
    parted = divergences(rows_a, rows_b)
    divergence = parted[0] if parted else None
    names_a, names_b = set(series(rows_a)), set(series(rows_b))
    for d in parted:  # each metric's own first divergent step
        where = f"first differs at step {d.step:g}"
        changes.append(Change(d.metric, "changed", "diverged", d.a, d.b, detail=where))
    for name in sorted(names_b - names_a - set(fb)):
        changes.append(Change(key=name, kind="added", scope="series"))
    for name in sorted(names_a - names_b - set(fa)):
        changes.append(Change(key=name, kind="removed", scope="series"))
    parts = [_metric_phrase(c) for c in changes[:3] if c.scope == "final"]
    if divergence is not None:
        parts.append(f"series diverge at step {divergence.step} ({divergence.metric})")
    return Section(name="", title="", changes=changes, summary=", ".join(parts), divergence=divergence)


def _metric_phrase(c: Change) -> str:
    if c.kind == "changed" and c.delta is not None:
        sign = "+" if c.delta >= 0 else "−"
        return f"{c.key} {fmt_value(c.old)} → {fmt_value(c.new)} ({sign}{abs(c.delta):.4g})"
    return change_phrase(c)


# --------------------------------------------------------------------------- outputs


def diff_outputs(a: Record, b: Record, open_blob: OpenBlob | None = None) -> Section:
    """The outputs section: run status, exit code and output files.

    Files compare as a replay compares them (`repro.compare.outputs`), exactly: TensorBoard event
    files by directory, tag and step, metric files by value, timings left out, and tensor files
    tensor by tensor, when ``open_blob`` finds their stored bytes; else by hash.
    """
    ra, rb = a.results, b.results
    changes = scalar("status", ra.status, rb.status, "status")
    changes += scalar("exit_code", ra.exit_code, rb.exit_code, "status")

    def opener(entry: FileEntry) -> Path | None:
        return open_blob(entry.hash) if open_blob is not None and entry.stored else None

    entries_b, notes = _paired_run_dirs(a, b)
    images = [r.deps.image.id if r.deps.image else None for r in (a, b)]
    side_a = Outputs(a.id, list(ra.outputs), opener, image=images[0])
    side_b = Outputs(b.id, entries_b, opener, image=images[1])
    compared = compare_outputs(side_a, side_b, STRICT, tensors=open_blob is not None)
    shared = {w.path: w.writers() for w in [*ra.shared_writes, *rb.shared_writes]}
    files = [_output_change(d, shared.get(d.path)) for d in compared if d.status != "same"]
    changes += files
    notes += [f"{d.path}: {d.note}" for d in compared if d.status == "same" and d.note]
    parts = []
    if any(c.key == "status" for c in changes):
        parts.append(f"status {ra.status} → {rb.status}")
    if files:
        parts.append(files_summary(files))
    return Section(
        name="",
        title="",
        changes=changes,
        summary=", ".join(parts),
        groups=group_by_dir(files) if len(files) > MAX_GROUPS else [],
        notes=notes,
    )


def _paired_run_dirs(a: Record, b: Record) -> tuple[list[FileEntry], list[str]]:
    """B's outputs, those under the Hydra run directory repro pinned for B read as under A's.

    Each run of a Hydra app writes into its own pinned directory; the same file in both is one
    output compared, not one removed and one added.
    """
    entries = list(b.results.outputs)
    da, db = hydra.pinned_dir(a.command.injected), hydra.pinned_dir(b.command.injected)
    if not da or not db or da == db:
        return entries, []
    prefix = db.rstrip("/") + "/"
    paired = [
        dataclasses.replace(e, path=da.rstrip("/") + "/" + e.path[len(prefix) :])
        if e.path.startswith(prefix)
        else e
        for e in entries
    ]
    return paired, [f"outputs in the Hydra run directories repro pinned compared in place: {db}/… as {da}/…"]


def _output_change(d: OutputDiff, writers: str | None = None) -> Change:
    """A changed output as a diff row; one that several processes wrote at once (``writers``) says so
    first: its bytes depend on which wrote last, whatever they hold."""
    kind = {"missing": "removed", "added": "added"}.get(d.status, "changed")
    old, new = d.original_size, d.replay_size
    delta = (new or 0) - (old or 0)
    detail = None
    if d.values is not None and d.values.first is not None:
        f = d.values.first
        at = f" at step {f.step}" if f.step is not None else ""
        detail = f"{f.name}{at}: {fmt_value(f.original)} → {fmt_value(f.replay)}"
    tensors = _tensor_changes(d.tensors) if d.tensors is not None else None
    if tensors is not None:
        detail = _tensors_detail(tensors)
    elif d.kind == "tensors" and d.note:
        detail = d.note  # unreadable on one side, say
    if writers is not None and kind == "changed":
        detail = f"written by {writers} at once" + (f"; {detail}" if detail else "")
    change = Change(key=d.path, kind=kind, scope="file", old=old, new=new, delta=delta, detail=detail)
    change.tensors = tensors
    return change


def _tensor_changes(t: TensorReport) -> TensorFileChange:
    """The tensors of a file that differ: values largest difference first, then shape, dtype, presence."""
    values = sorted(t.differing, key=lambda d: (-_nan_big(d.max_abs), d.name))
    found = [TensorChange(d.name, "value", d.max_abs, d.max_rel) for d in values]
    found += [TensorChange(m.name, m.reason, a=m.original, b=m.replay) for m in t.mismatched]
    found += [TensorChange(name, "only_a") for name in t.only_original]
    found += [TensorChange(name, "only_b") for name in t.only_replay]
    return TensorFileChange(found, t.identical)


def _nan_big(x: float) -> float:
    return float("inf") if x != x else x


def _tensors_detail(t: TensorFileChange) -> str:
    """``1 tensor differs: 2.bias (max abs 0.031); 3 unchanged`` (the largest difference first)."""
    n = len(t.differing)
    if not n:
        return f"other bytes, all {plural(t.unchanged, 'tensor')} equal"
    first = t.differing[0]
    how = f"max abs {first.max_abs:.3g}" if first.max_abs is not None else first.kind.replace("_", " ")
    verb = "differs" if n == 1 else "differ, first"
    return f"{plural(n, 'tensor')} {verb}: {first.name} ({how}); {t.unchanged} unchanged"
