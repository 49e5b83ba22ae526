"""Rendering of run records: the `run` summary line, `ls` table, `show` summary, `verify`'s signature."""

from __future__ import annotations

import os
import shlex
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repro import schemas, ui
from repro.backends import registry
from repro.facts.determinism import ledger_text
from repro.runtime.contract import INDUCTOR_KNOB_PREFIX
from repro.store.capsule import ATTESTATION_NAME, MODEL_SIGNATURE_NAME
from repro.ui import escape
from repro.units import plural, shorten

if TYPE_CHECKING:  # types only: `repro ls` renders its table without importing the core behind them
    from repro.facts.lockfile import LockedPackage
    from repro.get import GetResult
    from repro.rerun.inputs import InputSource
    from repro.store.attestation import Summary
    from repro.store.index import RunRow
    from repro.store.record import FileEntry, Record, RunWarning, SeriesInfo
    from repro.store.signing import Seal

_STATUS_COLOUR = {"succeeded": "green", "failed": "red", "interrupted": "yellow", "incomplete": "yellow",
                  "running": "blue", "invalid": "red"}  # fmt: skip


def _rel(path: Path, root: Path) -> str:
    try:
        return os.path.relpath(path, Path.cwd()) if path.is_relative_to(root) else str(path)
    except ValueError:
        return str(path)


def run_summary_dict(record: Record, run_dir: Path, kind: str = "run") -> dict[str, Any]:
    """`repro run --json` (``kind`` "run") and `repro resume --json` ("resume"): schemas/<kind>.json."""
    res = record.results
    return schemas.answer(
        kind,
        {
            "id": record.id,
            "status": res.status,
            "exit_code": res.exit_code,
            "duration_s": res.duration_s,
            "run_dir": str(run_dir),
            "command": shlex.join(record.command.argv),
            "backend": record.backend.name,
            "mode": record.determinism.mode,
            "seed": record.seeds.master,
            "world_size": record.env.world_size,
            "outputs": [_output_dict(o) for o in res.outputs],
            "metrics": res.final_metrics,
            "warnings": [warning_dict(w) for w in record.warnings],
            "parent": record.parent,
            "resumed_from": record.resumed_from,
            "detached": False,
            "job_id": None,
        },
    )


def detached_dict(record: Record, run_dir: Path, job_id: str) -> dict[str, Any]:
    """`repro run --detach --json`: the run as submitted; `repro ls` seals it once the job ended."""
    data = run_summary_dict(record, run_dir)
    return data | {"status": "pending", "exit_code": None, "duration_s": None, "detached": True,
                   "job_id": job_id}  # fmt: skip


def multirun_dict(answers: list[dict[str, Any]]) -> dict[str, Any]:
    """`repro run --json` of a Hydra multirun: one answer, one run answer per job."""
    return schemas.answer("multirun", {"runs": answers})


def warning_dict(warning: RunWarning) -> dict[str, str]:
    return {"code": warning.code, "message": warning.message}


def _output_dict(o: FileEntry) -> dict[str, Any]:
    found: dict[str, Any] = {"path": o.path, "size": o.size, "hash": o.hash}
    if o.link is not None:
        found["link"] = o.link  # a link the run made: its target, never followed
    return found


def run_summary_line(record: Record, capsule: Path, root: Path) -> str:
    res = record.results
    status = ui.style(res.status, _STATUS_COLOUR.get(res.status, "bold"))
    outs = f", {plural(len(res.outputs), 'output file')}" if res.outputs else ""
    return f"run {record.id} {status} in {res.duration_s or 0:.1f}s{outs} · record {_rel(capsule, root)}"


_LS_HEADERS = ["ID", "CREATED (UTC)", "STATUS", "BACKEND", "DURATION", "COMMAND"]
_MIN_COMMAND = 20  # a command column narrower than this is not worth cutting to


def ls_table(rows: list[RunRow], width: int | None = None) -> str:
    """`repro ls`: one run a line, in the order given; the command quoted so it can be pasted back.

    ``width``: the terminal's, to which the command column is cut (with `…`); None: never cut.
    """
    body = []
    for r in rows:
        duration = f"{r.duration_s:.1f}s" if r.duration_s is not None else "-"
        created = r.created.replace("T", " ")[:19]
        kind = f" ({r.kind} of {r.parent}: {r.verdict or '?'})" if r.parent else ""
        if r.kind == "resume":
            kind = f" (resume of {r.parent})"
        body.append([r.id, created, r.status + kind, r.backend or "-", duration, r.command])
    if width is not None:
        widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(_LS_HEADERS[:-1])]
        room = max(width - sum(widths) - 2 * len(widths), _MIN_COMMAND)
        for row in body:
            row[-1] = shorten(row[-1], room)
    return ui.table(body, _LS_HEADERS)


def ls_dict(rows: list[RunRow]) -> dict[str, Any]:
    """`repro ls --json` (schemas/ls.json): the runs in the order shown."""
    return schemas.answer("ls", {"runs": [
        {"id": r.id, "created": r.created, "status": r.status, "kind": r.kind, "parent": r.parent,
         "backend": r.backend, "duration_s": r.duration_s, "command": r.command, "verdict": r.verdict}
        for r in rows
    ]})  # fmt: skip


def world_text(record: Record) -> str:
    """``2 processes (torchrun), process group gloo; rank 0 → cpu, rank 1 → cpu``."""
    world = max(record.env.world_size, record.command.nproc_per_node)
    text = f"{plural(world, 'process', 'processes')} (torchrun)"
    group = record.determinism.knobs.get("process_group_backend")
    if group:
        text += f", process group {group}"
    if record.env.rank_devices:
        text += "; " + ", ".join(f"rank {r} → {d}" for r, d in record.env.rank_devices.items())
    return text


def show_text(
    record: Record,
    packages: list[LockedPackage] | None = None,
    attestation: Summary | None = None,
    sources: list[InputSource] | None = None,
    model_signature: Summary | None = None,
) -> str:
    """A human summary of a record, one fact per line (its strings through `escape.terminal`: a
    capsule's control characters and colours are shown, never obeyed); ``packages``: its lock, listed
    in full; ``sources``: where a replay finds each input."""
    record = escape.scrub_terminal(record)
    sources, packages = escape.scrub_terminal(sources), escape.scrub_terminal(packages)
    attestation, model_signature = escape.scrub_terminal(attestation), escape.scrub_terminal(model_signature)
    lines = _run_lines(record) + _code_lines(record) + _input_lines(record, packages)
    lines += [("replay data", source.describe()) for source in sources or []]
    lines += _determinism_lines(record) + _where_lines(record) + _result_lines(record)
    if attestation is not None:
        lines.append(("attestation", attestation_text(attestation)))
    if model_signature is not None:
        lines.append(("model signature", model_signature_text(model_signature)))
    width = max(len(k) for k, _ in lines)
    return "\n".join(f"{ui.style(k.ljust(width), 'dim')}  {ui.printable(v)}" for k, v in lines)


def _run_lines(r: Record) -> list[tuple[str, str]]:
    """The run, its status and command."""
    lines: list[tuple[str, str]] = []
    res = r.results
    head = f"{ui.style(res.status, _STATUS_COLOUR.get(res.status, 'bold'))} (exit {res.exit_code}, "
    head += f"{res.duration_s or 0:.1f}s, backend {r.backend.name})"
    lines.append(("run", f"{r.id}  {head}" + (f"  {r.kind} of {r.parent}" if r.parent else "")))
    if r.resumed_from:
        lines.append(("resumed", f"resume of {r.resumed_from}"))
    if r.verification:
        lines.append(("verdict", str(r.verification.get("summary") or r.verification.get("status"))))
    lines.append(
        ("command", " ".join(r.command.argv) + (f"   (cwd {r.command.cwd})" if r.command.cwd != "." else ""))
    )
    if r.command.injected:
        lines.append(("added by repro", " ".join(r.command.injected)))
    if r.command.params:
        lines.append(("params", ", ".join(f"{k}={v}" for k, v in r.command.params.items())))
    return lines


def _code_lines(r: Record) -> list[tuple[str, str]]:
    """The code: git state or snapshot, and files earlier runs left."""
    lines: list[tuple[str, str]] = []
    c = r.code
    if c.kind == "git":
        commit = (c.commit or "no commit")[:10]
        dirty = ""
        if c.untracked or "code.untracked" not in r.lists:
            untracked = len([e for e in c.untracked if e.path not in c.earlier_outputs])
        else:  # the list was not read: the files earlier runs left are among the untracked
            untracked = r.listed("code.untracked") - len(c.earlier_outputs)
        if c.dirty:
            dirty = f", dirty ({'patch, ' if c.patch else ''}{untracked} untracked)"
        files = plural(r.listed("code.files"), "file")
        others = r.listed("code.listed")
        listed = f", {plural(others, 'other untracked file')} listed (not code)" if others else ""
        lines.append(("code", f"git {commit} on {c.branch or 'detached'}{dirty}, {files}{listed}"
                      + (f", remote {c.remote}" if c.remote else "")))  # fmt: skip
    else:
        lines.append(("code", f"snapshot of {plural(r.listed('code.files'), 'file')}"))
    for path, run_id in list(c.earlier_outputs.items())[:5]:
        lines.append(("left by run", f"{path} (written by {run_id}; not counted as code)"))
    if len(c.earlier_outputs) > 5:
        lines.append(("left by run", f"… and {len(c.earlier_outputs) - 5} more"))
    return lines


def _input_lines(r: Record, packages: list[LockedPackage] | None) -> list[tuple[str, str]]:
    """Data, dependencies (``packages``: the lock in full) and the image."""
    lines: list[tuple[str, str]] = []
    for item in r.data.inputs:
        count = item.count or len(item.files)
        lines.append(("data", f"{item.path}: {plural(count, 'file')}, {ui.human_bytes(item.size)}, "
                      f"xxh3 {item.digest[:16]}"))  # fmt: skip
    d = r.deps
    if d.lockfile:
        pinned = [f"{p.name}=={p.version}" for p in packages] if packages else d.requirements
        torch = next((q for q in pinned if q.startswith("torch==")), None)
        variant = f"{d.variant} lock, " if d.variant else ""
        cuda = f", CUDA {d.cuda}" if d.cuda else ""
        lines.append(("deps", f"{d.lockfile} ({variant}{len(pinned)} pinned"
                      f"{', ' + torch if torch else ''}{cuda})"))  # fmt: skip
        if d.project_lock:
            groups = ", ".join(d.groups) if d.groups else "none"
            lines.append(("deps", f"read from the project's {d.project_lock} as it is "
                          f"(groups besides the main dependencies: {groups})"))  # fmt: skip
        for mismatch in d.mismatches:
            lines.append(("deps", f"! not as locked: {mismatch}"))
    lines += lock_lines(packages or [], in_image=d.image is not None)
    if d.image:
        reuse = "reused" if d.image.reused else f"built in {d.image.build_seconds or 0:.0f}s"
        reuse = "loaded from the capsule" if d.image.loaded else reuse
        lines.append(("image", f"{d.image.tag} ({(d.image.id or '')[:19]}, {reuse}), base {d.image.base}"))
    return lines


def _determinism_lines(r: Record) -> list[tuple[str, str]]:
    """Seeds, the determinism mode and what undid it."""
    lines: list[tuple[str, str]] = []
    seed_note = "drawn" if r.seeds.drawn else "given"
    lines.append(("seed", f"{r.seeds.master} ({seed_note}); PYTHONHASHSEED {r.seeds.pythonhashseed}"))
    for name, facts in sorted(r.seeds.framework.items()):
        lines.append(("seed", f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(facts.items()))))
    m = r.determinism
    knobs = f"mode {m.mode}"
    if m.threads:
        knobs += f", {plural(m.threads, 'thread')}"
    if m.isa:
        knobs += f", ISA {m.isa}"
    if m.mode == "gpu":
        nccl = m.knobs.get("nccl") or {}
        knobs += f", TF32 off, CUBLAS_WORKSPACE_CONFIG {m.env.get('CUBLAS_WORKSPACE_CONFIG', '-')}"
        if nccl:
            knobs += f", NCCL {nccl.get('NCCL_ALGO', '?')}/{nccl.get('NCCL_PROTO', '?')}"
    if m.applied is False:
        knobs += " — NOT applied: the repro runtime never loaded"
    elif m.allow_nondeterministic_ops:
        knobs += ", nondeterministic ops allowed"
    lines.append(("determinism", knobs))
    if m.nondeterministic_ops:
        lines.append(("nondet ops", ledger_text(m.nondeterministic_ops, limit=8)))
    if m.changed_by_script:
        shown = ", ".join(
            f"{k}={v.get('found') if isinstance(v, dict) else v}" for k, v in m.changed_by_script.items()
        )
        lines.append(("changed", f"by the script after repro set them: {shown}"))
    if r.seeds.script_seeds:
        own = ", ".join(
            f"{s.get('api')}({s.get('value')}) at {s.get('where')}" for s in r.seeds.script_seeds[:4]
        )
        lines.append(("script seeds", own))
    return lines


def _where_lines(r: Record) -> list[tuple[str, str]]:
    """Processes, Slurm job, environment, trackers, in-process capture."""
    lines: list[tuple[str, str]] = []
    res = r.results
    if r.command.nproc_per_node > 1 or r.env.world_size > 1:
        lines.append(("world", world_text(r)))
    for entry in registry.ENTRIES:  # each backend's own lines (Slurm: the job and its nodes)
        lines += entry.shown(r.backend.details)
    e = r.env
    env = f"Python {e.python}, torch {e.torch or '-'}, {e.os}, {e.cpu_model or e.machine}"
    if e.gpus:
        env += f", {len(e.gpus)}× {e.gpus[0].get('name')}"
    lines.append(("environment", env))
    if r.determinism.knobs.get("compiled"):
        lines.append(("torch.compile", compile_text(r)))
    for t in res.trackers:
        where = t.get("tracking_uri") or t.get("path") or ""
        runs = ", ".join(t.get("runs") or []) or "no run found"
        lines.append(("tracker", f"{t.get('tool')} {runs} ({where})"))
    if r.captured_in_process:
        lines.append(
            ("captured", "in-process (repro.capture): no container, seeds applied late, not replayable")
        )
    return lines


def compile_text(r: Record) -> str:
    """``compiled with g++ 12.2.0; Inductor deterministic, autotune off (asked: max_autotune)``."""
    knobs = r.determinism.knobs
    inductor = {
        k.removeprefix(INDUCTOR_KNOB_PREFIX): v
        for k, v in knobs.items()
        if k.startswith(INDUCTOR_KNOB_PREFIX)
    }
    tuned = [k for k in ("max_autotune", "coordinate_descent_tuning") if inductor.get(k)]
    text = f"compiled with {r.env.compiler or 'an unrecorded compiler'}; Inductor"
    text += " deterministic," if inductor.get("deterministic") else ""
    text += f" autotune {'on (' + ', '.join(tuned) + ')' if tuned else 'off'}"
    asked = knobs.get("inductor_autotune_turned_off")
    return text + (f" (asked for {', '.join(asked)}: turned off)" if asked else "")


def _result_lines(r: Record) -> list[tuple[str, str]]:
    """Metrics, outputs, checkpoints, failure, warnings, redactions."""
    lines: list[tuple[str, str]] = []
    res = r.results
    if res.final_metrics:
        lines.append(("metrics", ", ".join(f"{k}={v:.6g}" for k, v in res.final_metrics.items())))
    lines += series_lines(res.series)
    for o in res.outputs[:20]:
        shown = f"link -> {o.link}, not followed" if o.link is not None else ui.human_bytes(o.size)
        kept = "" if o.link is not None or o.stored else ", hashed, not kept"
        lines.append(("output", f"{o.path} ({shown}, {o.hash[:16]}{kept})"))
    if len(res.outputs) > 20:
        lines.append(("output", f"… and {len(res.outputs) - 20} more"))
    kept_files = [o for o in res.outputs if o.stored and o.link is None]
    if kept_files:
        lines.append(
            ("get", f"`repro get {r.id} [PATH…] -o DIR` writes {plural(len(kept_files), 'kept output')}")
        )
    for shared in res.shared_writes[:5]:
        lines.append(("shared write", f"{shared.path} by {shared.writers()} at once"))
    for ck in res.checkpoints[-5:]:
        ranks = len(ck.states)
        states = plural(ranks, "process", "processes")
        lines.append(("checkpoint", f"{ck.path or ck.hash[:16]} (step {ck.step}, RNG states of {states}"
                      f"{', file kept' if ck.blob else ''})"))  # fmt: skip
    if len(res.checkpoints) > 5:
        lines.append(("checkpoint", f"… and {len(res.checkpoints) - 5} earlier"))
    if res.outputs_outside_root:
        lines.append(("outside root", ", ".join(res.outputs_outside_root[:5])))
    if res.failure:
        lines.append(("failure", f"{res.failure.get('message')}; {res.failure.get('hint')}"))
    if res.status == "failed" and res.stderr_tail:
        lines.append(("stderr", res.stderr_tail[-1]))
    for w in r.warnings:
        lines.append(("warning", w.message))
    if r.redactions:
        lines.append(("redacted", ", ".join(sorted(set(r.redactions)))))
    return lines


def series_lines(series: list[SeriesInfo], most: int = 20) -> list[tuple[str, str]]:
    """One line per metric series: name, points, the last value and its step, and where it came from."""
    lines = []
    for s in series[:most]:
        last = "-" if s.last is None else f"{s.last:.6g}"
        step = "" if s.last_step is None else f" at step {s.last_step:g}"
        where = s.source if not s.origin or s.origin == s.source else f"{s.source} {s.origin}"
        lines.append(("series", f"{s.name}: {plural(s.points, 'point')}, last {last}{step} ({where})"))
    if len(series) > most:
        lines.append(("series", f"… and {len(series) - most} more (repro show --json lists them all)"))
    return lines


_KIND_LABEL = {"wheel": "wheels", "source": "source builds", "unknown": "locked"}


def lock_lines(packages: list[LockedPackage], in_image: bool, width: int = 100) -> list[tuple[str, str]]:
    """Every locked package, grouped by how it went into the image (wheels, source builds), wrapped."""
    if not packages:
        return []
    lines: list[tuple[str, str]] = []
    for kind in ("source", "wheel", "unknown"):
        names = [f"{p.name}=={p.version}" for p in packages if p.installed_from == kind]
        if not names:
            continue
        if kind == "unknown":
            why = "wheel or source build: not recorded" if in_image else "the host's environment, no image"
            names[-1] += f"  ({why})"
        rows = textwrap.wrap(", ".join(names), width, break_on_hyphens=False) or [""]
        lines += [(_KIND_LABEL[kind] if i == 0 else "", row) for i, row in enumerate(rows)]
    return lines


def model_signature_text(summary: Summary) -> str:
    """`repro show CAPSULE`'s line about the OpenSSF model signature it carries (read, not checked)."""
    key = f"key hint {summary.key_ids[0]}…" if summary.key_ids else "no key hint"
    return _carried_text(MODEL_SIGNATURE_NAME, summary, "OpenSSF model signature v1", key)


def attestation_text(summary: Summary) -> str:
    """`repro show CAPSULE`'s line about the attestation it carries (read, not checked)."""
    signed = f"signed with key {', '.join(summary.key_ids)}" if summary.key_ids else "not signed"
    return _carried_text(ATTESTATION_NAME, summary, "in-toto + SLSA provenance v1", signed)


def _carried_text(member: str, summary: Summary, what: str, signer: str) -> str:
    """A capsule's signed ``member``: ``what`` it is, the files it names and ``signer``, or why it cannot be
    read; never checked here."""
    if summary.problem is not None:
        return f"{member}: unreadable ({summary.problem})"
    return (
        f"{member}: {what}, {plural(summary.subjects, 'file')}, {signer} "
        "(not checked: `repro verify-attestation CAPSULE --key PUBFILE`)"
    )


def seal_text(seal: Seal) -> str:
    """`repro verify`'s line about a capsule's signature."""
    if not seal.signed:
        return "not signed"
    if seal.algorithm in ("ed25519", "ecdsa-p256"):
        if seal.checked:
            return (
                f"signed with {seal.algorithm} key {seal.key_id}: signature checked with its public key, "
                "sealed by the holder of the private key"
            )
        return f"signed with {seal.algorithm} key {seal.key_id} (not checked: pass --key PUBFILE)"
    if seal.checked:
        return f"signed with key {seal.key_id}: signature checked, sealed by a holder of that key"
    return f"signed with key {seal.key_id} (not checked: pass --key KEYFILE)"


def seal_dict(seal: Seal | None) -> dict[str, Any]:
    """`repro verify --json`'s signature fields (all None for a run in the store)."""
    if seal is None:
        return {"signed": None, "key_id": None, "signature_algorithm": None, "signature_checked": None}
    return {"signed": seal.signed, "key_id": seal.key_id, "signature_algorithm": seal.algorithm,
            "signature_checked": seal.checked}  # fmt: skip


def verify_dict(record: Record, members: int, image_bytes: int | None, seal: Seal | None) -> dict[str, Any]:
    """`repro verify --json` of a capsule that passed (schemas/verify.json)."""
    body = {"ok": True, "id": record.id, "capsule_format": record.format, "members": members,
            "image_bytes": image_bytes, "error": None}  # fmt: skip
    return schemas.answer("verify", body | seal_dict(seal))


def verify_failed_dict(message: str, member: str | None) -> dict[str, Any]:
    """`repro verify --json` of a capsule that failed (exit 6): what failed, and in which member."""
    error = {"code": "capsule_invalid", "message": message, "member": member}
    body = {"ok": False, "id": None, "capsule_format": None, "members": None, "image_bytes": None,
            "error": error}  # fmt: skip
    return schemas.answer("verify", body | seal_dict(None))


def export_dict(
    run_id: str,
    as_: str,
    path: Path,
    size: int,
    image_bytes: int | None,
    key_id: str | None,
    data_bytes: int | None = None,
) -> dict[str, Any]:
    """`repro export --json` (schemas/export.json): what was written, where."""
    body = {"id": run_id, "as": as_, "path": str(path), "bytes": size, "image_bytes": image_bytes,
            "data_bytes": data_bytes, "signed": key_id is not None, "key_id": key_id}  # fmt: skip
    return schemas.answer("export", body)


def get_text(result: GetResult) -> str:
    """`repro get`: the files written, the outputs not kept and the links, one line each."""
    lines = [f"wrote {plural(len(result.written), 'file')} ({ui.human_bytes(result.bytes)}) of run "
             f"{result.run} to {result.dest}, each checked against its hash"]  # fmt: skip
    lines += [f"  {e.path}  {ui.human_bytes(e.size)}" for e in result.written[:20]]
    if len(result.written) > 20:
        lines.append(f"  … and {len(result.written) - 20} more")
    for e in result.not_kept:
        lines.append(f"not kept: {e.path} ({ui.human_bytes(e.size)}, hashed, not stored)")
    for e in result.links:
        lines.append(f"link: {e.path} -> {e.link} (recorded, not recreated)")
    return "\n".join(lines)


def get_dict(result: GetResult) -> dict[str, Any]:
    """`repro get --json` (schemas/get.json)."""
    body = {
        "id": result.run,
        "dest": str(result.dest),
        "written": [_output_dict(e) for e in result.written],
        "not_kept": [_output_dict(e) for e in result.not_kept],
        "links": [_output_dict(e) for e in result.links],
        "bytes": result.bytes,
    }
    return schemas.answer("get", body)


def replay_note(record: Record, verb: str) -> str | None:
    """One line when the run a command acts on is a replay (or a check's re-execution), naming the
    original: `latest` after a replay is the replay."""
    if record.kind == "run" or not record.parent:
        return None
    what = "a replay" if record.kind == "replay" else f"a {record.kind} re-execution"
    return f"{record.id} is {what} of {record.parent}; `repro {verb} {record.parent}` acts on the original"
