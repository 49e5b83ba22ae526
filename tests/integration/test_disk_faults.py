"""A killed or starved `repro export` and `repro lock`: one line naming the path, nothing left behind.

- `repro export --with-image` SIGKILLed while it writes: its hidden working directory (the image
  archive, the capsule half-written) stays beside the destination until `repro gc` removes it.
- A full disk during an export (a small tmpfs of its own): "No space left on device: <dest>",
  exit 1 as errors.OSFailure says, the destination untouched and no temporary file left.
- A full temporary directory during a lock compile (TMPDIR on a tiny tmpfs): one line naming
  it and the TMPDIR hint, not pip's flattened traceback.

Mounting needs root: without it these skip, saying so.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.builders import tmpfs
from tests.conftest import Project

TRAIN = """\
import os
os.makedirs("outputs", exist_ok=True)
with open("outputs/model.txt", "w") as f:
    f.write("0.5\\n" * 1000)
print("trained")
"""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of its own (root only), 20 MiB unless the test asks otherwise, unmounted afterwards."""
    yield from tmpfs(tmp_path / "small", "20m")


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    yield from tmpfs(tmp_path / "tiny", "16k")


def _fill(disk: Path, leave: int) -> None:
    """Fill ``disk`` until about ``leave`` bytes are free."""
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    (disk / "filler").write_bytes(b"\0" * max(0, free - leave))


def test_a_full_disk_during_export_names_the_file_and_leaves_nothing(
    project: Project, small_disk: Path
) -> None:
    project.write("train.py", TRAIN)
    project.write("blob.bin", os.urandom(3 << 20).hex())  # 6 MiB of code: the capsule needs room
    project.commit("train")
    assert project.repro("run", "--backend", "local", "train.py").code == 0
    dest = small_disk / "exports" / "run.tar"
    dest.parent.mkdir()
    dest.write_bytes(b"an earlier export")
    _fill(small_disk, 1 << 20)

    r = project.repro("export", "latest", "-o", str(dest))
    assert r.code == 1, r.out + r.err
    assert r.err.splitlines()[0] == f"repro: error: No space left on device: {dest}", r.err
    assert "hint: free space on that disk" in r.err and "Traceback" not in r.err
    assert dest.read_bytes() == b"an earlier export"  # the old file, whole
    assert sorted(p.name for p in dest.parent.iterdir()) == ["run.tar"]  # no temporary left
    assert not list((project.root / ".repro" / "exports").iterdir())
    (small_disk / "filler").unlink()
    assert project.repro("export", "latest", "-o", str(dest)).code == 0
    assert project.repro("verify", str(dest)).code == 0


def test_a_full_temp_dir_during_a_lock_compile_is_one_line_naming_it(tmp_path: Path, tiny_disk: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "repro.yaml").write_text("backend: local\n")
    (root / "requirements.in").write_text("requests\n")
    env = {
        **os.environ,
        "TMPDIR": str(tiny_disk),
        "REPRO_CACHE_DIR": str(tmp_path / "cache"),
        "NO_COLOR": "1",
    }
    r = subprocess.run(
        [sys.executable, "-m", "repro", "lock"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("repro: error:")]
    assert errors == [
        f"repro: error: No space left on device: {tiny_disk} (the temporary directory pip-compile works in)"
    ], r.stderr
    assert "hint: free space there, or point TMPDIR at a disk with room" in r.stderr
    assert "Traceback" not in r.stderr and "site-packages" not in r.stderr, r.stderr
    assert not (root / "lockfiles").exists() or not list((root / "lockfiles").iterdir())
    assert not list(tiny_disk.iterdir())  # its temporary directory went with it


def _export_dirs(where: Path) -> list[Path]:
    return [p for p in where.iterdir() if p.name.startswith(".run.tar.repro-export-")]


@pytest.mark.docker
def test_sigkill_during_export_with_image_leaves_only_what_gc_removes(
    project: Project, tmp_path: Path
) -> None:
    project.write("train.py", TRAIN)
    project.commit("train")
    r = project.repro("run", "--backend", "docker", "train.py")
    assert r.code == 0, r.err
    where = tmp_path / "exports"  # outside the project: gc finds it through the store's note
    where.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "repro", "export", "latest", "-o", str(where / "run.tar"), "--with-image"],
        cwd=project.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not any(
        p.is_file() and p.stat().st_size > 8 << 20 for d in _export_dirs(where) for p in d.rglob("*")
    ):
        assert proc.poll() is None, "the export ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    (left,) = _export_dirs(where)
    size = sum(p.stat().st_size for p in left.rglob("*") if p.is_file())
    assert size > 8 << 20 and not (where / "run.tar").exists()

    dry = project.repro("gc", "--dry-run")
    assert dry.code == 0 and f"would remove {left} (" in dry.out and "killed `repro export`" in dry.out
    assert left.is_dir()
    gc = project.repro("gc")
    assert gc.code == 0 and f"removed {left} (" in gc.out, gc.out + gc.err
    assert list(where.iterdir()) == [] and not list((project.root / ".repro" / "exports").iterdir())

    done = project.repro("export", "latest", "-o", str(where / "run.tar"), "--with-image")
    assert done.code == 0, done.err
    assert [p.name for p in where.iterdir()] == ["run.tar"]
    assert project.repro("verify", str(where / "run.tar")).code == 0
    assert "nothing to remove" in project.repro("gc").err


def test_gc_keeps_the_working_directory_of_a_live_export(project: Project, tmp_path: Path) -> None:
    """A note whose export still runs (this test's process) is not a leftover; one naming a directory
    not shaped like an export's removes nothing but itself."""
    from repro.export import NOTES_DIR

    project.write("train.py", TRAIN)
    project.commit("train")
    assert project.repro("run", "--backend", "local", "train.py").code == 0
    notes = project.root / ".repro" / NOTES_DIR
    notes.mkdir()
    live = tmp_path / f".run.tar.repro-export-{os.getpid()}"
    live.mkdir()
    (notes / "live.json").write_text(json.dumps({"pid": os.getpid(), "work": str(live)}))
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data.bin").write_bytes(b"keep")
    (notes / "forged.json").write_text(json.dumps({"pid": 999_999_999, "work": str(precious)}))
    gc = project.repro("gc")
    assert gc.code == 0, gc.err
    assert live.is_dir() and (precious / "data.bin").read_bytes() == b"keep"
    assert sorted(p.name for p in notes.iterdir()) == ["live.json"]


@pytest.mark.docker
def test_a_full_disk_while_the_image_is_saved_names_the_file(project: Project, small_disk: Path) -> None:
    project.write("train.py", TRAIN)
    project.commit("train")
    assert project.repro("run", "--backend", "docker", "train.py").code == 0
    dest = small_disk / "run.tar"  # the image alone is larger than the whole disk
    r = project.repro("export", "latest", "-o", str(dest), "--with-image")
    assert r.code == 1, r.out + r.err
    assert f"repro: error: No space left on device: {dest}" in r.err.splitlines(), r.err
    assert "Traceback" not in r.err
    assert list(small_disk.iterdir()) == [] and not list((project.root / ".repro" / "exports").iterdir())
