"""What tests build again and again: records (bare with overrides, sealed in a store, or complete and
realistic over an in-memory blob store), a run's record as `repro show --json` gives it, comparison sides
over a folder of outputs, committed training projects, the plain-Python training script several tests write,
and a small tmpfs for full-disk tests. Fixtures (`project`, `cli`) stay in conftest.py; forged capsules in
forging.py."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import xxhash

from repro.compare.verdict import Side
from repro.store.record import (
    CodeInfo,
    CommandInfo,
    DataInfo,
    DataInput,
    DepsInfo,
    DeterminismInfo,
    EnvInfo,
    FileEntry,
    Record,
    ResultInfo,
    RunStatus,
    SeedInfo,
)
from repro.store.runs import Store
from tests.conftest import Project

RUN_ID = "20260101-000000-abcd"
CREATED = "2026-01-01T00:00:00+00:00"


def record(
    run_id: str = RUN_ID,
    created: str = CREATED,
    *,
    argv: list[str] | None = None,
    status: RunStatus | None = None,
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


def sealed(
    store: Store,
    run_id: str = RUN_ID,
    status: RunStatus = "succeeded",
    argv: list[str] | None = None,
    **fields: Any,
) -> Record:
    """The record of a finished run of ``argv`` (``python train.py`` unless given) with ``status`` and
    ``fields``, sealed in ``store`` as `repro run` leaves it."""
    made = record(run_id, argv=argv or ["python", "train.py"], status=status)
    for name, value in fields.items():
        setattr(made, name, value)
    store.seal(made, store.begin_run(run_id, made.command.argv))
    return made


class Blobs:
    """A tiny in-memory blob store: put bytes, get a digest."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def put(self, raw: bytes | str) -> str:
        raw = raw.encode() if isinstance(raw, str) else raw
        digest = f"{len(self.data):032x}"
        self.data[digest] = raw
        return digest

    def __call__(self, digest: str) -> bytes | None:
        return self.data.get(digest)


def metrics_blob(blobs: Blobs, values: list[float], name: str = "loss") -> str:
    """The digest of a metrics stream holding ``values`` of metric ``name``, one a step."""
    rows = [json.dumps({"name": name, "value": v, "step": i}) for i, v in enumerate(values)]
    return blobs.put("\n".join(rows) + "\n")


def data_files(prefix: str, n: int, size: int = 32, salt: str = "") -> list[FileEntry]:
    """``n`` data files ``PREFIX/s00000.csv``… of ``size`` bytes, their hashes changed by ``salt``."""
    return [FileEntry(path=f"{prefix}/s{i:05d}.csv", size=size, hash=f"h{salt}{prefix}{i}") for i in range(n)]


def make_record(blobs: Blobs, run_id: str = "run-a", **over: object) -> Record:
    """A complete, realistic record; keyword arguments replace whole parts."""
    record = Record(
        id=run_id,
        created="2025-01-01T00:00:00Z",
        command=CommandInfo(
            argv=["python", "train.py", "--lr", "0.1", "--batch-size", "32"],
            params={"lr": 0.1, "batch_size": 32},
        ),
        code=CodeInfo(kind="git", commit="a" * 40, branch="main"),
        data=DataInfo(inputs=[DataInput(path="data", digest="d1", size=320, files=data_files("data", 10))]),
        deps=DepsInfo(
            lockfile="requirements.lock",
            requirements=["numpy==1.26.0", "torch==2.13.0"],
            freeze=["numpy==1.26.0", "torch==2.13.0"],
        ),
        seeds=SeedInfo(master=1, derived={"python": 11, "numpy": 12, "torch": 13}),
        determinism=DeterminismInfo(
            mode="strict", threads=1, isa="avx2", knobs={"deterministic_algorithms": True}
        ),
        env=EnvInfo(python="3.11.9", torch="2.13.0", cpu_model="Xeon", hostname="box-1"),
        results=ResultInfo(
            status="succeeded",
            exit_code=0,
            metrics=metrics_blob(blobs, [0.9, 0.7, 0.5]),
            final_metrics={"val_error": 0.303},
            outputs=[FileEntry(path="outputs/model.pt", size=1000, hash="m1")],
        ),
    )
    for key, value in over.items():
        setattr(record, key, value)
    return record


def same_as(record: Record, run_id: str) -> Record:
    """A second run of the same capsule: another id, timings and host, same everything else."""
    other = copy.deepcopy(record)
    other.id = run_id
    other.created = "2025-01-02T00:00:00Z"
    other.results.started, other.results.duration_s = "2025-01-02T00:00:01Z", 12.5
    other.results.logs = {"stdout": "x" * 32}
    other.env.hostname = "box-2"
    return other


def other_results(record: Record) -> Record:
    """The run's model came out with other bytes: its differences now explain something."""
    record.results.outputs = [FileEntry(path="outputs/model.pt", size=1000, hash="m-other")]
    return record


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


def tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``20m``, ``16k``) mounted at ``mount`` (made here) for a fixture to yield from,
    unmounted afterwards; the test is skipped where this process may not mount one (root only)."""
    if os.getuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
