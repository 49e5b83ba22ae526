"""The cuda.index setting, the CUDA version read from a lock, the refusal of a CPU torch in a cuda lock."""

from __future__ import annotations

import hashlib
import socket
import time
from pathlib import Path

import pytest

from repro import config
from repro.backends import images
from repro.errors import BuildError, ConfigError, IndexUnreachable
from repro.facts import lockfile, lockplan, lockvariants
from repro.facts.cudawheels import cuda_build
from repro.fetch.reach import check_reachable
from repro.store import limits


def _unasked(index: str) -> None:
    """The index probe of a lock that is reused or compiled by a stand-in: never asked."""
    raise AssertionError(f"{index} asked, though nothing is compiled")


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_cuda_index_defaults_to_the_cu128_index_and_takes_flag_env_file_and_none(tmp_path: Path) -> None:
    assert config.resolve(tmp_path, environ={}).settings.cuda_index == lockvariants.CUDA_INDEX
    (tmp_path / "repro.yaml").write_text("cuda:\n  index: https://mirror.example/cu126\n")
    plan = config.resolve(tmp_path, environ={})
    assert plan.settings.cuda_index == "https://mirror.example/cu126"
    assert plan.source("cuda_index") == "repro.yaml"
    plan = config.resolve(tmp_path, environ={"REPRO_CUDA_INDEX": "none"})
    assert plan.settings.cuda_index is None and plan.source("cuda_index") == "REPRO_CUDA_INDEX"
    flags = config.Flags(cuda_index="file:///srv/wheels")
    assert config.resolve(tmp_path, flags, environ={"REPRO_CUDA_INDEX": "none"}).settings.cuda_index == (
        "file:///srv/wheels"
    )
    with pytest.raises(ConfigError, match="cuda.index 'cu128' is not a package index URL.*REPRO_CUDA_INDEX"):
        config.resolve(tmp_path, environ={"REPRO_CUDA_INDEX": "cu128"})


def test_the_cuda_index_is_in_the_lock_inputs_and_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "requirements.in").write_text("torch\n")
    default = lockplan.plan_lock(tmp_path, None, "cuda")
    other = lockplan.plan_lock(tmp_path, None, "cuda", "https://mirror.example/cu126")
    none = lockplan.plan_lock(tmp_path, None, "cuda", None)
    assert len({default.digest, other.digest, none.digest}) == 3
    assert (
        lockplan.plan_lock(tmp_path, None, "cpu", None).digest
        == lockplan.plan_lock(tmp_path, None, "cpu").digest
    )
    digest = hashlib.sha256(b"torch").hexdigest()
    other.cached.parent.mkdir(parents=True)
    other.cached.write_text(f"torch==2.7.1+cu126 \\\n    --hash=sha256:{digest}\n")
    lock = lockplan.complete(
        lockplan.plan_lock(tmp_path, None, "cuda", "https://mirror.example/cu126"), reachable=_unasked
    )
    assert lock.cuda == "12.6" and lock.path is not None
    text = lock.path.read_text()
    assert "# variant: cuda\n# cuda-index: https://mirror.example/cu126\n" in text
    assert lockfile.inputs_header(text) == other.digest
    assert lockplan.is_stale(tmp_path, None, "cuda", "https://mirror.example/cu126")[0] is False
    stale, why = lockplan.is_stale(tmp_path, None, "cuda")  # the default index: other inputs
    assert stale and "other inputs" in why


def test_an_unreachable_cuda_index_fails_the_lock_within_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "requirements.in").write_text("torch\n")
    index = f"http://127.0.0.1:{closed_port()}/whl/cu128"
    start = time.monotonic()
    with pytest.raises(IndexUnreachable) as caught:
        lockplan.relock(tmp_path, None, "cuda", cuda_index=index, reachable=check_reachable)
    assert time.monotonic() - start < 10
    refused = "(cuda.index) does not answer: connection refused"
    assert caught.value.message == f"the CUDA wheel index {index} {refused}"
    assert "cuda.index" in (caught.value.hint or "") and "none" in (caught.value.hint or "")
    assert not (tmp_path / "lockfiles").exists()
    with pytest.raises(IndexUnreachable, match="no such file"):
        check_reachable((tmp_path / "absent").as_uri())


def test_the_wheelhouse_fetch_asks_the_cuda_index_once_and_fails_fast(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.lock"
    lock.write_text(f"torch==2.7.1+cu128 \\\n    --hash=sha256:{hashlib.sha256(b'x').hexdigest()}\n")
    index = f"http://127.0.0.1:{closed_port()}/whl/cu128"
    start = time.monotonic()
    with pytest.raises(IndexUnreachable, match="connection refused"):
        images.prepare_wheelhouse(lock, tmp_path / "house", extra_index=index, python_version="3.11")
    assert time.monotonic() - start < 10


PIN = "nvidia-cuda-runtime-cu12==12.8.90"


@pytest.mark.parametrize(
    ("pins", "version"),
    [
        (["torch==2.7.1+cu128", "triton==3.3.1"], "12.8"),
        (["torch==2.7.1", PIN, "numpy==2.2.0"], "12.8"),  # PyPI's torch: CUDA from its runtime
        (["torch==2.14.1", "nvidia-cuda-runtime==13.0.96", "cuda-toolkit==13.0.2"], "13.0"),
        (["torchvision==0.22.1+cu126", "torch==2.7.1+cu126"], "12.6"),
        (["numpy==2.2.0"], None),  # no torch: nothing to say
    ],
)
def test_the_cuda_version_is_read_from_the_lock(pins: list[str], version: str | None) -> None:
    found = cuda_build(pins)
    assert (found.version if found else None) == version


@pytest.mark.parametrize(
    ("pins", "why"),
    [
        (["torch==2.13.0+cpu", "numpy==2.2.0"], "torch==2.13.0+cpu, a CPU build"),
        (["torch==2.13.0", "numpy==2.2.0"], "torch==2.13.0, a CPU build"),  # no runtime beside it
        (["torch==2.7.1+cu128", "torchvision==0.22.1+cpu"], "torchvision==0.22.1+cpu, a CPU build"),
        (["torch==2.7.1+cu128", "torchaudio==2.7.1+cu126"], "mixes CUDA versions"),
    ],
)
def test_a_cuda_lock_with_a_cpu_torch_is_refused(pins: list[str], why: str) -> None:
    with pytest.raises(BuildError, match=why.replace("+", r"\+")) as caught:
        cuda_build(pins)
    assert caught.value.hint


def test_a_reused_cuda_lock_with_a_cpu_torch_is_refused_and_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPRO_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "requirements.in").write_text("torch\n")
    plan = lockplan.plan_lock(tmp_path, None, "cuda")
    plan.cached.parent.mkdir(parents=True)
    plan.cached.write_text(f"torch==2.13.0+cpu \\\n    --hash=sha256:{hashlib.sha256(b't').hexdigest()}\n")
    with pytest.raises(BuildError, match=r"torch==2.13.0\+cpu, a CPU build"):
        lockplan.plan_lock(tmp_path, None, "cuda")
    stale, why = lockplan.is_stale(tmp_path, None, "cuda")
    assert stale and "CPU build" in why


def test_a_cuda_image_names_its_cuda_in_tag_and_labels() -> None:
    digest = hashlib.sha256(b"t").hexdigest()
    lock = f"torch==2.7.1+cu128 \\\n    --hash=sha256:{digest}\n"
    assert images.cuda_of(lock) == "12.8"
    tag = images.image_tag("FROM x", lock.encode(), "sha256:" + "0" * 64, "12.8")
    assert tag.startswith("repro-env:cu12.8-") and images.is_own_tag(tag) and limits.is_reference(tag)
    assert images.image_labels(lock.encode(), "b", "cuda", cuda="12.8")[images.LABEL_CUDA] == "12.8"
    assert images.LABEL_CUDA not in images.image_labels(lock.encode(), "b", "cpu")
    with pytest.raises(BuildError, match="CPU build"):
        images.cuda_of(lock.replace("+cu128", "+cpu"))


def test_show_names_the_cuda_version_of_a_cuda_lock() -> None:
    from repro.store.record import Record
    from repro.ui.records import show_text

    record = Record(id="r1", created="2026-01-01T00:00:00+00:00")
    record.command.argv = ["python", "train.py"]
    record.deps.lockfile = "lockfiles/requirements-cuda.lock.txt"
    record.deps.variant, record.deps.cuda = "cuda", "12.8"
    record.deps.requirements = ["numpy==2.2.0", "torch==2.7.1+cu128"]
    text = show_text(record)
    assert "lockfiles/requirements-cuda.lock.txt (cuda lock, 2 pinned, torch==2.7.1+cu128, CUDA 12.8)" in text
    record.deps.cuda, record.deps.variant = None, "cpu"
    assert "CUDA" not in show_text(record)
