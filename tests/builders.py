"""What tests build again and again: records (with overrides), a run's record as `repro show --json` gives it,
comparison sides over a folder of outputs, committed training projects, and the small training script shaped
like public code that several tests write. Fixtures (`project`, `cli`) stay in conftest.py; forged capsules in
forging.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import xxhash

from repro.compare.verdict import Side
from repro.store.capsule import FileEntry, Record
from tests.conftest import Project

RUN_ID = "20260101-000000-abcd"
CREATED = "2026-01-01T00:00:00+00:00"


def record(
    run_id: str = RUN_ID,
    created: str = CREATED,
    *,
    argv: list[str] | None = None,
    status: str | None = None,
    **fields: Any,
) -> Record:
    """A `Record` with ``fields`` (any of its own: ``command=``, ``results=``, ``backend=``…) and, where
    given, its command line and its result's status set on top."""
    made = Record(id=run_id, created=created, **fields)
    if argv is not None:
        made.command.argv = argv
    if status is not None:
        made.results.status = status
    return made


def show_json(project: Project, ref: str = "latest", cwd: Path | None = None) -> dict[str, Any]:
    """The record of run ``ref`` as `repro show REF --json` prints it (the command must succeed)."""
    answer = project.repro("show", ref, "--json", cwd=cwd)
    assert answer.code == 0, answer.err
    data: dict[str, Any] = json.loads(answer.out)
    return data


def outputs(root: Path, *, nested: bool = True) -> list[FileEntry]:
    """Every file under ``root`` (only those directly in it where not ``nested``) as a run's stored outputs,
    sorted by path."""
    found = root.rglob("*") if nested else root.iterdir()
    return sorted(
        (
            FileEntry(
                p.relative_to(root).as_posix(),
                p.stat().st_size,
                xxhash.xxh3_128_hexdigest(p.read_bytes()),
                stored=True,
            )
            for p in found
            if p.is_file()
        ),
        key=lambda e: e.path,
    )


def side(
    root: Path,
    label: str = "run",
    metrics: list[dict[str, Any]] | None = None,
    stdout: str = "",
    *,
    nested: bool = True,
    **kw: Any,
) -> Side:
    """A comparison side whose outputs are the files under ``root`` (a run's output directory); ``kw`` sets
    the side's other fields (``exit_code``, ``status``, ``trace``…)."""
    return Side(
        label=label,
        outputs=outputs(root, nested=nested),
        open_output=lambda e: root / e.path,
        metrics=metrics or [],
        stdout=stdout,
        **kw,
    )


def training_project(
    project: Project,
    script: str,
    *,
    as_name: str = "train.py",
    points: bool = True,
    ignore: str | None = None,
    message: str | None = "train",
) -> Project:
    """``project`` with ``tests/integration/scripts/SCRIPT`` as its ``as_name``, the points data set where
    ``points``, a .gitignore of ``ignore`` where given, committed with ``message`` (not where None)."""
    project.script(script, as_name)
    if points:
        project.points()
    if ignore is not None:
        project.write(".gitignore", ignore)
    if message is not None:
        project.commit(message)
    return project


def toy(project: Project, name: str = "t.py", message: str = "t") -> Project:
    """``project`` with a one-line script ``name`` that prints "trained", committed with ``message``."""
    project.write(name, "print('trained')\n")
    project.commit(message)
    return project


def hand_trained(epochs: int = 2, width: int = 4) -> str:
    """A training script in plain Python (no torch, so it runs in any image): argparse ``--epochs``/``--lr``,
    ``width`` unseeded weights, one loss line an epoch, the model saved as ``outputs/model.json``."""
    return f"""\
import argparse
import json
import random
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default={epochs})
parser.add_argument("--lr", type=float, default=0.1)
args = parser.parse_args()
w = [random.random() for _ in range({width})]
for epoch in range(args.epochs):
    w = [x - args.lr * (x - 0.5) for x in w]
    print(f"epoch {{epoch}} loss {{sum((x - 0.5) ** 2 for x in w):.6f}}")
Path("outputs").mkdir(exist_ok=True)
Path("outputs/model.json").write_text(json.dumps(w))
"""
