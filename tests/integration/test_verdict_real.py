"""Verdicts on real training code: timing text, TensorBoard events and metric files.

The script seeds itself, logs to TensorBoard through SummaryWriter (whose event file
names and contents carry wall times), prints tqdm-style bars and `ms/batch` timings,
and writes a metrics.json with a `train_runtime`. A replay in another process must come
back identical; a run with another learning rate must diverge, naming tag and step.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import xxhash

from repro.capsule import FileEntry
from repro.compare import Side, compare_runs
from tests.conftest import Project

ARGS = ["--epochs", "2", "--workers", "2", "--output-dir", "outputs", "--save", "outputs/model.pt"]


def _side(root: Path, label: str) -> Side:
    outputs = sorted(
        (
            FileEntry(
                p.relative_to(root).as_posix(), p.stat().st_size, xxhash.xxh3_128_hexdigest(p.read_bytes())
            )
            for p in root.rglob("*")
            if p.is_file()
        ),
        key=lambda e: e.path,
    )
    return Side(label, outputs, lambda e: root / e.path, [], "")


def test_self_seeding_tensorboard_script_replays_identical_and_another_lr_diverges(
    project: Project, tmp_path: Path
) -> None:
    project.script("tb_train.py", "train.py")
    project.commit("train")
    r = project.repro("run", "--backend", "local", "--", "python", "train.py", *ARGS)
    assert r.code == 0, r.err
    r = project.repro("replay", "latest", "--json")
    assert r.code == 0, r.out + r.err
    verdict = json.loads(r.out)
    assert verdict["status"] == "identical", verdict["reasons"]
    by_kind = {o["kind"]: o for o in verdict["outputs"]}
    events = by_kind["tensorboard"]
    assert events["status"] == "same" and events["values"]["compared"] > 0
    assert events["path"].startswith("outputs/runs/") and events["replay_path"] is not None  # clock names
    table = by_kind["table"]
    assert table["path"] == "outputs/metrics.json" and table["values"]["ignored"] == ["train_runtime"]
    model = next(o for o in verdict["outputs"] if o["path"] == "outputs/model.pt")
    assert model["status"] == "same"

    # Another process, another learning rate: the TensorBoard scalars part at the second step.
    other = tmp_path / "other"
    other.mkdir()
    (other / "train.py").write_bytes((project.root / "train.py").read_bytes())
    subprocess.run(
        [sys.executable, "train.py", *ARGS, "--lr", "0.3"], cwd=other, check=True, capture_output=True
    )
    v = compare_runs(_side(project.root / "outputs", "A"), _side(other / "outputs", "B"), "gpu")
    assert v.status == "diverged"
    tb = next(r for r in v.reasons if r.path and r.path.startswith("runs/"))
    assert tb.code == "metric_differs"
    assert (tb.fields["name"], tb.fields["step"]) == ("train/loss", 2)  # step 1's loss precedes any update
    assert "train/loss at step 2" in tb.message
