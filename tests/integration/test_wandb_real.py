"""W&B in offline mode, for real: the run started inside `repro run` carries the repro run id as a tag,
the record names the W&B run, and W&B's files are neither outputs nor undeclared inputs."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from repro.store.runs import Store
from tests.conftest import Project

pytestmark = pytest.mark.slow
pytest.importorskip("wandb", reason="wandb is not installed (pip install 'repro-capsule[integrations]')")

OFFLINE = {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_TAGS": "baseline"}


def _records(path: Path) -> Iterator[Any]:
    """The protobuf records of an offline `.wandb` file (a LevelDB-style log of 32 KiB blocks)."""
    from wandb.proto import wandb_internal_pb2 as pb

    raw, pos, block, buf = path.read_bytes(), 7, 32768, b""
    while pos + 7 <= len(raw):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", raw[pos : pos + 7])
        buf, pos = buf + raw[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind in (1, 4):  # a whole record, or the last piece of one
            record = pb.Record()  # type: ignore[attr-defined]  # generated protobuf class
            record.ParseFromString(buf)
            buf = b""
            yield record


def test_a_wandb_offline_run_is_tagged_with_the_repro_run(project: Project) -> None:
    project.script("wandb_train.py", "train.py")
    project.points()
    project.write(".gitignore", "outputs/\nwandb/\nmodel.pt\n")
    project.commit("wandb")
    r = project.repro("run", "--backend", "local", "--data", "data", "--", "python", "train.py",
                      "--epochs", "1", env=OFFLINE)  # fmt: skip
    assert r.code == 0, r.err
    record = Store(project.root).resolve("latest").record
    (tracker,) = record.results.trackers
    assert tracker["tool"] == "wandb" and tracker["path"] == "wandb" and tracker["mode"] == "offline"
    (run_id,) = tracker["runs"]
    assert [o.path for o in record.results.outputs] == ["model.pt"]
    assert not any(p.startswith("wandb/") for p in record.data.undeclared)

    (log,) = (project.root / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb")
    runs = [rec.run for rec in _records(log) if rec.WhichOneof("record_type") == "run"]
    assert runs and list(runs[0].tags) == ["baseline", f"repro:{record.id}"]
