"""DLRM's `model.pt` (the model object and its args, which `weights_only` refuses) compared tensor by tensor
by `repro diff`, the unpickling done in the container sandbox: a real engine, a real image with torch. A
hostile pickle runs its code there, with no network and nothing of the host but the two files, read-only."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from repro.backends import unpickle
from repro.cli import main
from repro.errors import SandboxUnavailable
from repro.store.record import CommandInfo, FileEntry, Record, ResultInfo
from repro.store.runs import Store
from tests.unit.test_pickled_outputs import dlrm_save

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Skip where no local image repro built has torch (a fresh CI engine before any docker run)."""
    tmp = tmp_path_factory.mktemp("probe")
    try:
        a, b = unpickle.unpickle_sandboxed(dlrm_save(tmp / "a", 0), dlrm_save(tmp / "b", 0), [])
    except SandboxUnavailable as e:
        pytest.skip(f"no sandbox to unpickle in: {e.reason}")
    assert a.is_file() and b.is_file()


def _record(store: Store, run_id: str, model: Path) -> Record:
    entry = FileEntry(path="model.pt", size=model.stat().st_size, hash=store.put_file(model), stored=True)
    return Record(
        id=run_id,
        created="2025-01-01T12:00:00Z",
        command=CommandInfo(argv=["torchrun", "--nproc_per_node", "2", "dlrm_s_pytorch.py"]),
        results=ResultInfo(status="succeeded", exit_code=0, outputs=[entry]),
    )


def test_diff_compares_the_tensors_a_full_unpickling_reads(
    sandbox: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = Store(tmp_path)
    store.ensure()
    for run_id, seed in (("20250101-120000-aaaa", 0), ("20250101-130000-bbbb", 1)):
        record = _record(store, run_id, dlrm_save(tmp_path / f"{seed}.pt", seed))
        store.seal(record, store.begin_run(record.id, record.command.argv))
    assert main(["-C", str(tmp_path), "diff", "latest~1", "latest", "--json"]) == 0
    out = capsys.readouterr().out
    assert "\\u001b" not in out
    (model,) = [
        c for s in json.loads(out)["sections"] if s["name"] == "outputs" for c in s["changes"]
        if c["key"] == "model.pt"
    ]  # fmt: skip
    assert model["tensors"] is not None, model
    names = {t["name"] for t in model["tensors"]["differing"]}
    assert names == {"state_dict.0.weight", "state_dict.0.bias", "state_dict.2.weight", "state_dict.2.bias"}
    assert "unreadable" not in json.dumps(model)


class Hostile:
    """A pickle that runs a command when loaded: it must run in the container, never here."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        import os

        return os.system, (f"touch {self.marker}; touch /in/a; wget -q -T 2 http://127.0.0.1:9/ || true",)


def test_a_hostile_pickle_runs_only_inside_the_sandbox(sandbox: None, tmp_path: Path) -> None:
    import torch

    marker = f"/tmp/repro-hostile-{uuid.uuid4().hex}"
    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    torch.save({"payload": Hostile(marker), "w": torch.ones(2)}, a)
    torch.save({"payload": Hostile(marker), "w": torch.zeros(2)}, b)
    before = a.read_bytes()
    plain_a, plain_b = unpickle.unpickle_sandboxed(a, b, [])
    assert not Path(marker).exists()  # the command ran in the container's own /tmp, not this machine's
    assert a.read_bytes() == before  # mounted read-only, and a copy at that
    loaded = torch.load(plain_a, weights_only=True)
    assert isinstance(loaded["payload"], int) and loaded["w"].tolist() == [1.0, 1.0]
    assert torch.load(plain_b, weights_only=True)["w"].tolist() == [0.0, 0.0]
