"""The sections for what a run ran on: its dependencies (pins, installed packages, image) and its
environment (software, hardware, world size, variables, backend)."""

from __future__ import annotations

from typing import Any

from repro.backends import registry
from repro.diff.changes import change_phrase, dict_changes, scalar
from repro.diff.model import Change, Section
from repro.diff.reader import SafeReader
from repro.diff.versions import compare_versions, parse_pins
from repro.store.record import Record

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
