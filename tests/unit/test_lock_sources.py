"""Which requirements a run locks (the folder the command runs from), and a CPU lock whose torch would
make a CUDA-sized image."""

from __future__ import annotations

from pathlib import Path

from repro.facts.cudawheels import cuda_in_cpu_lock
from repro.facts.locksource import nearest_source


def test_the_requirements_of_the_folder_the_command_runs_from_are_found(tmp_path: Path) -> None:
    (tmp_path / "requirements.in").write_text("numpy\n")
    (tmp_path / "exp" / "vision" / "runs").mkdir(parents=True)
    (tmp_path / "exp" / "vision" / "requirements.txt").write_text("torch\n")
    assert nearest_source(tmp_path, tmp_path / "exp" / "vision") == "exp/vision/requirements.txt"
    assert nearest_source(tmp_path, tmp_path / "exp" / "vision" / "runs") == "exp/vision/requirements.txt"
    (tmp_path / "exp" / "vision" / "requirements.in").write_text("torch\n")  # .in before .txt, as at the root
    assert nearest_source(tmp_path, tmp_path / "exp" / "vision") == "exp/vision/requirements.in"
    assert nearest_source(tmp_path, tmp_path / "exp") is None  # the root's own: find_source reads it
    assert nearest_source(tmp_path, tmp_path) is None
    assert nearest_source(tmp_path / "exp", tmp_path) is None  # outside the project


def test_a_cpu_lock_with_a_cuda_torch_is_named_with_the_pin_that_avoids_it() -> None:
    cuda = [
        "filelock==3.16.1",
        "nvidia-cublas-cu12==12.8.4.1",
        "nvidia-cudnn-cu12==9.10.2.21",
        "torch==2.13.0",
    ]
    said = cuda_in_cpu_lock(cuda)
    assert said is not None and "torch==2.13.0+cpu" in said and "2 nvidia-* libraries" in said
    assert "download.pytorch.org/whl/cpu" in said and "\n" not in said
    assert cuda_in_cpu_lock(["torch==2.13.0+cpu", "filelock==3.16.1"]) is None
    assert cuda_in_cpu_lock(["numpy==2.1.0"]) is None


def test_the_run_says_it_before_the_build_and_records_it() -> None:
    from repro.backends.base import Event
    from repro.run.lock import warn_cuda_in_cpu_lock
    from repro.store.record import Record

    record = Record(id="20260101-000000-abcd", created="2026-01-01T00:00:00Z")
    record.deps.variant = "cpu"
    record.deps.requirements = ["nvidia-cublas-cu12==12.8.4.1", "torch==2.13.0"]
    said: list[Event] = []
    warn_cuda_in_cpu_lock(record, said.append)
    assert [e.kind for e in said] == ["info"] and "torch==2.13.0+cpu" in said[0].text
    assert [w.code for w in record.warnings] == ["cuda_in_cpu_lock"]
    record.deps.variant, record.warnings, said[:] = "cuda", [], []  # a CUDA run wants exactly that
    warn_cuda_in_cpu_lock(record, said.append)
    assert said == [] and record.warnings == []
