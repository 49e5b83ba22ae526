"""A container's copy of the project left behind by a killed repro: brought back from its kept state."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from repro.backends import owners, scratch
from repro.errors import CapsuleInvalid


def _write(root: Path, rel: str, text: str = "x") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def killed(tmp_path: Path) -> tuple[Path, Path]:
    """A project, and a run's work dir whose copy the command wrote into before everything was killed."""
    root, work = tmp_path / "proj", tmp_path / "run" / "work"
    _write(root, "train.py", "code")
    _write(root, "checkpoints/old.pt", "old")
    _write(root, "data/x.csv", "1,2")
    scratch.make(root, work / scratch.TREE, ["data"])
    tree = work / scratch.TREE
    _write(tree, "checkpoints/last.pt", "epoch 1")
    _write(tree, "checkpoints/old.pt", "rewritten")
    os.utime(tree / "checkpoints" / "old.pt", ns=(1, 1))
    _write(tree, "runs/events.out.tfevents.1", "scalars")
    return root, work


def test_the_copy_keeps_its_stats_beside_it(killed: tuple[Path, Path]) -> None:
    root, work = killed
    state = json.loads((work / "tree.json").read_text())
    assert state["format"] == scratch.FORMAT and state["root"] == str(root)
    assert state["separate"] == ["data"] and sorted(state["copied"]) == ["checkpoints/old.pt", "train.py"]
    assert not list(work.glob(".*.tmp"))  # written atomically: no temporary file left


def test_recover_brings_back_what_the_command_wrote_and_drops_the_copy(killed: tuple[Path, Path]) -> None:
    root, work = killed
    found = scratch.left_over(work)
    assert found is not None and found.root == root
    assert found.changed == ["checkpoints/last.pt", "checkpoints/old.pt", "runs/events.out.tfevents.1"]
    assert not (root / "checkpoints" / "last.pt").exists()  # left_over changes nothing

    written = scratch.recover(work, root)
    assert written == found.changed
    assert (root / "checkpoints" / "last.pt").read_text() == "epoch 1"
    assert (root / "checkpoints" / "old.pt").read_text() == "rewritten"
    assert (root / "train.py").read_text() == "code"
    assert not (work / "tree").exists() and not (work / "tree.json").exists()
    assert scratch.recover(work, root) == []  # nothing left: a second call is a no-op


def test_a_copy_without_its_state_never_ran_a_command_and_is_dropped(killed: tuple[Path, Path]) -> None:
    root, work = killed
    (work / "tree.json").unlink()  # repro died while copying: the state is written last
    assert scratch.left_over(work) is None
    assert scratch.recover(work, root) == []
    assert not (work / "tree").exists() and not (root / "checkpoints" / "last.pt").exists()


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[]", b'{"format": "repro.scratch/v9"}', b'{"format": "repro.scratch/v1"}'],
)
def test_an_unreadable_state_leaves_the_copy_and_says_how_to_take_the_files(
    killed: tuple[Path, Path], body: bytes
) -> None:
    root, work = killed
    (work / "tree.json").write_bytes(body)
    with pytest.raises(CapsuleInvalid) as raised:
        scratch.recover(work, root)
    assert "tree.json is unreadable" in str(raised.value) and str(work / "tree") in (raised.value.hint or "")
    assert (work / "tree" / "checkpoints" / "last.pt").read_text() == "epoch 1"  # untouched, for the user
    assert not (root / "checkpoints" / "last.pt").exists()


def test_no_copy_at_all_is_nothing_to_recover(tmp_path: Path) -> None:
    assert scratch.left_over(tmp_path) is None
    assert scratch.recover(tmp_path, tmp_path / "proj") == []


def test_an_unreadable_owners_state_refuses_before_moving_anything(killed: tuple[Path, Path]) -> None:
    root, work = killed
    (work / owners.STATE).write_text('{"format": "repro.owners/v1", "owners": 3}')
    with pytest.raises(CapsuleInvalid, match="owners and modes kept before the container ran"):
        scratch.recover(work, root)
    assert (work / "tree" / "checkpoints" / "last.pt").is_file()


@pytest.mark.skipif(os.getuid() != 0, reason="owners are only handed over when repro runs as root")
def test_owners_and_modes_handed_to_the_container_user_are_put_back(killed: tuple[Path, Path]) -> None:
    root, work = killed
    outputs = root / "outputs"
    theirs = _write(outputs, "someone-elses.txt")
    os.chown(theirs, 4242, 4243)
    root.chmod(0o750)
    tree = work / scratch.TREE
    owners.open_for(1000, 1000, [outputs, tree], [root], work / owners.STATE)
    assert theirs.stat().st_uid == 1000 and root.stat().st_mode & 0o005 == 0o005
    made = _write(tree, "model.pt", "weights")  # as the container user would
    os.chown(made, 1000, 1000)

    # repro was killed here: only the kept state knows what to put back
    assert "model.pt" in scratch.recover(work, root)
    assert (theirs.stat().st_uid, theirs.stat().st_gid) == (4242, 4243)
    assert root.stat().st_mode & 0o777 == 0o750
    assert (root / "model.pt").stat().st_uid == 0  # the run's own file: the host user's
    assert not (work / owners.STATE).exists()
