"""Paths under a run's own project root compare relative to it: a Lightning checkpoint saved by a run
in the project and by its replay in a scratch copy holds the same object written from two places."""

from __future__ import annotations

from pathlib import Path

import torch
import xxhash

from repro.compare.rootpath import PLACEHOLDER, relative, spellings
from repro.compare.verdict import Side, compare_runs
from repro.store.record import FileEntry


def test_the_root_is_replaced_only_where_it_is_the_whole_name(tmp_path: Path) -> None:
    roots = spellings("/a/proj")
    shown = relative("/a/proj/checkpoints/last.ckpt and /a/proj", roots)
    assert shown == f"{PLACEHOLDER}/checkpoints/last.ckpt and {PLACEHOLDER}"
    assert relative("/a/proj2/x /a/project", roots) == "/a/proj2/x /a/project"
    assert spellings(None) == () and spellings("/") == ()
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert set(spellings(str(tmp_path / "link"))) == {str(tmp_path / "link"), str(tmp_path / "real")}


def _checkpoint(root: str, weight: float) -> dict[str, object]:
    """What Lightning's ModelCheckpoint keeps in a .ckpt: absolute paths, as names and as values."""
    best = f"{root}/checkpoints/epoch=1-step=16.ckpt"
    return {
        "state_dict": {"net.weight": torch.full((2, 3), weight), "net.bias": torch.zeros(2)},
        "callbacks": {
            "ModelCheckpoint": {
                "dirpath": f"{root}/checkpoints",
                "best_model_path": best,
                "best_k_models": {best: torch.tensor(0.25)},
                "kth_value": torch.tensor(0.25),
            }
        },  # fmt: skip
    }


def _side(base: Path, root: str, weight: float) -> Side:
    path = base / "checkpoints" / "last.ckpt"
    path.parent.mkdir(parents=True)
    torch.save(_checkpoint(root, weight), path)
    digest = xxhash.xxh3_128_hexdigest(path.read_bytes())
    entry = FileEntry("checkpoints/last.ckpt", path.stat().st_size, digest)
    return Side(base.name, [entry], lambda e: base / e.path, [], "", root=root)


def test_a_checkpoint_that_differs_only_by_where_it_ran_is_identical(tmp_path: Path) -> None:
    run = _side(tmp_path / "a", "/home/me/proj", 0.5)
    replay = _side(tmp_path / "b", "/home/me/proj/.repro/runs/20260101-000000-abcd/code", 0.5)
    assert run.outputs[0].hash != replay.outputs[0].hash
    verdict = compare_runs(run, replay, "strict")
    assert verdict.status == "identical", verdict.reasons
    (out,) = verdict.outputs
    assert out.status == "same" and out.tensors is not None and out.tensors.rooted == 6
    assert "compared relative to it" in (out.note or "")


def test_a_weight_that_differs_still_diverges(tmp_path: Path) -> None:
    run = _side(tmp_path / "a", "/home/me/proj", 0.5)
    replay = _side(tmp_path / "b", "/scratch/code", 0.5000001)
    verdict = compare_runs(run, replay, "strict")
    assert verdict.status == "diverged"
    (out,) = verdict.outputs
    assert out.status == "changed" and out.tensors is not None
    assert [d.name for d in out.tensors.differing] == ["state_dict.net.weight"]


def test_without_the_roots_the_paths_differ(tmp_path: Path) -> None:
    run = _side(tmp_path / "a", "/home/me/proj", 0.5)
    replay = _side(tmp_path / "b", "/scratch/code", 0.5)
    run.root = replay.root = None
    verdict = compare_runs(run, replay, "strict")
    assert verdict.status == "diverged"
    (out,) = verdict.outputs
    assert out.tensors is not None and out.tensors.structural
