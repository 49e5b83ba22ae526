"""The sections for how a run was set to behave: its seeds and its determinism settings."""

from __future__ import annotations

from typing import Any

from repro.diff.changes import change_phrase, dict_changes, fmt_value, scalar
from repro.diff.model import Section
from repro.store.record import Record

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
