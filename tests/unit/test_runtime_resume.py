"""The exact-resume runtime: RNG states recorded at a checkpoint save and restored at its load.

In-process, without installing the hooks into the real torch (that would leak into other
tests): the functions the hooks call are exercised directly, and the hooks themselves on
stand-in modules. CUDA has no device here: its paths run against a stand-in `torch.cuda`
that keeps real byte tensors, the same calls a GPU build answers.
"""

from __future__ import annotations

import json
import random
import sys
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

from repro.runtime import ckptfiles, ckptrecord, ckptrestore, resumehooks, resumestate, resumesteps, rngstates


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "runtime"
    d.mkdir()
    env = {"REPRO_RUNTIME_DIR": str(d), "REPRO_RUN_ID": "r1", "REPRO_PROJECT_ROOT": str(tmp_path),
           "REPRO_RESUMED_FROM": "r0", "RANK": "0", "WORLD_SIZE": "1"}  # fmt: skip
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    fresh = {"step": 0, "restored": False, "generators": [], "ring": OrderedDict(),
             "marks_seen": set()}  # fmt: skip
    monkeypatch.setattr(resumestate, "state", fresh)
    return d


def _draws(generators: list[Any]) -> list[Any]:
    return [random.random(), np.random.rand(), torch.rand(3).tolist(), *[g.random() for g in generators]]


def test_every_stream_continues_after_restore(runtime: Path) -> None:
    generator = np.random.default_rng(5)
    resumestate.state["generators"].append(generator)
    states = rngstates.capture_states()
    json.dumps(states)  # JSON-ready
    expected = _draws([generator])
    _draws([generator])  # move every stream on
    assert rngstates.restore_states(states) == ["python", "numpy", "numpy_generators", "torch"]
    assert _draws([generator]) == expected


def test_a_saved_checkpoint_is_restored_at_its_first_load_only(runtime: Path, tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt" / "last.pt"
    ckpt.parent.mkdir()
    torch.save({"w": torch.ones(2)}, ckpt)
    resumestate.state["step"] = 12
    digest = ckptrecord.record_checkpoint(ckpt)
    assert digest is not None
    body = json.loads((runtime / "rng" / f"{digest}.rank0.json").read_text())
    assert body["path"] == "ckpt/last.pt" and body["step"] == 12
    expected = _draws([])

    resumestate.state["step"] = 0
    _draws([])
    ckptrestore.after_load(ckpt, ckptrestore.before_load(ckpt))
    assert _draws([]) == expected and resumestate.current_step() == 12
    assert ckptrestore.before_load(ckpt) is None  # a later load (an eval of the best model) restores nothing
    events = [json.loads(line) for line in (runtime / resumestate.EVENTS).read_text().splitlines()]
    assert events == [{"kind": "restored", "rank": 0, "path": "ckpt/last.pt", "hash": digest, "step": 12,
                       "streams": ["python", "numpy", "torch"]}]  # fmt: skip


def test_a_checkpoint_without_recorded_state_warns(
    runtime: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ckpt = tmp_path / "foreign.pt"
    torch.save({"w": torch.ones(2)}, ckpt)
    ckptrestore.after_load(ckpt, ckptrestore.before_load(ckpt))
    assert "has no recorded RNG state for rank 0; this resume will not be exact" in capsys.readouterr().err
    assert json.loads((runtime / resumestate.EVENTS).read_text())["kind"] == "missing"


def test_a_run_that_is_not_a_resume_never_restores(runtime: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPRO_RESUMED_FROM")
    assert ckptrestore.before_load(__file__) is None


def _file_module(calls: list[str]) -> tuple[Any, Any]:
    def save(obj: Any, f: Any) -> None:
        calls.append("save")
        Path(f).write_bytes(repr(obj).encode())

    def load(f: Any) -> bytes:
        calls.append("load")
        return Path(f).read_bytes()

    return save, load


def test_the_hooks_wrap_torch_save_and_load(
    runtime: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    save, load = _file_module(calls)
    fake_torch = SimpleNamespace(save=save, load=load)
    optim = SimpleNamespace(register_optimizer_step_post_hook=lambda hook: calls.append("hook"))
    monkeypatch.setitem(sys.modules, "torch.optim.optimizer", optim)
    resumehooks.install_torch(fake_torch)  # type: ignore[arg-type]
    fake_torch.save({"a": 1}, tmp_path / "x.ckpt")
    assert fake_torch.load(tmp_path / "x.ckpt") == b"{'a': 1}"
    assert calls == ["hook", "save", "load"]
    assert len(list((runtime / "rng").glob("*.rank0.json"))) == 1
    assert fake_torch.save.__wrapped__ is save


def test_the_hooks_wrap_safetensors(runtime: Path, tmp_path: Path) -> None:
    calls: list[str] = []
    save, load = _file_module(calls)
    module = SimpleNamespace(save_file=save, load_file=load)
    resumehooks.install_safetensors(module)  # type: ignore[arg-type]
    module.save_file({"w": 1}, str(tmp_path / "model.safetensors"))
    module.load_file(str(tmp_path / "model.safetensors"))
    assert calls == ["save", "load"]
    events = [json.loads(x) for x in (runtime / resumestate.EVENTS).read_text().splitlines()]
    assert [e["kind"] for e in events] == ["restored"]


def test_a_path_given_by_keyword_is_recorded_and_restored(runtime: Path, tmp_path: Path) -> None:
    calls: list[str] = []
    save, load = _file_module(calls)
    module = SimpleNamespace(save=save, load=load)
    resumehooks._wrap_checkpoint_io(module, "save", "load", "f")  # type: ignore[arg-type]
    module.save({"w": 1}, f=tmp_path / "by-keyword.pt")
    module.load(f=tmp_path / "by-keyword.pt")
    assert calls == ["save", "load"]
    assert len(list((runtime / "rng").glob("*.rank0.json"))) == 1
    events = [json.loads(x) for x in (runtime / resumestate.EVENTS).read_text().splitlines()]
    assert [e["kind"] for e in events] == ["restored"]


def test_lightning_saves_and_loads_are_wrapped_by_parameter_names(runtime: Path, tmp_path: Path) -> None:
    calls: list[str] = []

    def _atomic_save(checkpoint: Any, filepath: Any) -> None:
        calls.append("save")
        Path(filepath).write_bytes(repr(checkpoint).encode())

    def _load(path_or_url: Any, map_location: Any = None) -> bytes:
        calls.append("load")
        return Path(path_or_url).read_bytes()

    cloud_io = SimpleNamespace(_atomic_save=_atomic_save, _load=_load)
    resumehooks.install_lightning(cloud_io)  # type: ignore[arg-type]
    cloud_io._atomic_save({"epoch": 1}, filepath=tmp_path / "last.ckpt")
    cloud_io._load(path_or_url=tmp_path / "last.ckpt", map_location="cpu")
    assert calls == ["save", "load"]
    events = [json.loads(x) for x in (runtime / resumestate.EVENTS).read_text().splitlines()]
    assert [e["kind"] for e in events] == ["restored"]
    assert "lightning.fabric.utilities.cloud_io" in resumehooks.HOOKS


@pytest.mark.parametrize(
    ("loaded", "inexact"),
    [
        ({"loops": {"fit_loop": {"epoch_loop.batch_progress": {"current": {"ready": 3}}}}}, True),
        ({"state_dict": {}}, False),  # weights only (`load_from_checkpoint`): no loop state put back
    ],
)
def test_a_resumed_lightning_fit_loop_is_said_to_keep_its_own_counters(
    runtime: Path, tmp_path: Path, loaded: dict[str, Any], inexact: bool
) -> None:
    """Loading a checkpoint with Lightning's fit-loop state in a resume: an ``inexact`` event naming
    Lightning's loop counters (the record's warning), beside the restore."""
    cloud_io = SimpleNamespace(
        _atomic_save=lambda checkpoint, filepath: Path(filepath).write_bytes(b"ckpt"),
        _load=lambda path_or_url, map_location=None: loaded,
    )
    resumehooks.install_lightning(cloud_io)  # type: ignore[arg-type]
    cloud_io._atomic_save({}, filepath=tmp_path / "last.ckpt")
    assert cloud_io._load(tmp_path / "last.ckpt") is loaded
    events = [json.loads(x) for x in (runtime / resumestate.EVENTS).read_text().splitlines()]
    expected = [{"kind": "inexact", "rank": 0, "state": "lightning_loops"}] if inexact else []
    assert [e["kind"] for e in events][:1] == ["restored"] and events[1:] == expected


def test_a_checkpoint_saved_to_an_open_file_is_recorded_and_restored(runtime: Path, tmp_path: Path) -> None:
    import io

    module = SimpleNamespace(save=lambda obj, f: f.write(repr(obj).encode()), load=lambda f: f.read())
    resumehooks._wrap_checkpoint_io(module, "save", "load", "f")  # type: ignore[arg-type]
    with open(tmp_path / "last.pt", "wb") as f:
        module.save({"epoch": 3}, f)
        assert len(list((runtime / "rng").glob("*.rank0.json"))) == 1  # hashed after a flush, still open
    with open(tmp_path / "last.pt", "rb") as reader:
        assert module.load(reader) == b"{'epoch': 3}"
    module.save({"epoch": 4}, io.BytesIO())  # no file behind it: nothing to record
    assert len(list((runtime / "rng").glob("*.rank0.json"))) == 1
    events = [json.loads(x) for x in (runtime / resumestate.EVENTS).read_text().splitlines()]
    assert [e["kind"] for e in events] == ["restored"]


class FakeCuda:
    """`torch.cuda` with two devices whose generator states are real byte tensors."""

    def __init__(self, devices: int = 2) -> None:
        self.states = [torch.Generator().manual_seed(100 + i).get_state() for i in range(devices)]
        self.set_calls: list[int] = []

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return True

    def device_count(self) -> int:
        return len(self.states)

    def get_rng_state_all(self) -> list[torch.Tensor]:
        return [s.clone() for s in self.states]

    def set_rng_state(self, state: torch.Tensor, device: int) -> None:
        self.states[device] = state.clone()
        self.set_calls.append(device)


def test_cuda_states_of_every_device_are_recorded_and_restored(
    runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded_cuda = FakeCuda()
    monkeypatch.setattr(torch, "cuda", recorded_cuda)
    states = rngstates.capture_states()
    assert len(states["cuda"]) == 2
    before = [s.clone() for s in recorded_cuda.states]
    recorded_cuda.states = [torch.Generator().manual_seed(9).get_state() for _ in range(2)]
    assert "cuda" in rngstates.restore_states(states)
    assert recorded_cuda.set_calls == [0, 1]
    assert all(torch.equal(a, b) for a, b in zip(before, recorded_cuda.states, strict=True))


def test_fewer_cuda_devices_on_resume_are_reported(runtime: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one = FakeCuda(devices=1)
    rngstates.restore_cuda(SimpleNamespace(cuda=one, frombuffer=torch.frombuffer, uint8=torch.uint8),
                        [rngstates._b64(bytes(s.tolist())) for s in FakeCuda(2).states])  # fmt: skip
    assert one.set_calls == [0]
    event = json.loads((runtime / resumestate.EVENTS).read_text())
    assert event["kind"] == "missing" and "2 CUDA device(s) recorded, 1 here" in event["reason"]


def test_no_cuda_state_before_cuda_is_initialised(runtime: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = FakeCuda()
    monkeypatch.setattr(cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch, "cuda", cuda)
    assert "cuda" not in rngstates.capture_states()


def test_a_rank_that_did_not_save_writes_its_state_of_the_checkpointed_step(
    runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    optimizer = SimpleNamespace(param_groups=[], state={})
    resumesteps.after_step(optimizer, (), {})
    resumesteps.after_step(optimizer, (), {})  # step 2: what rank 0 checkpoints
    expected = _draws([])
    resumesteps.after_step(optimizer, (), {})  # rank 1 is a step ahead when it sees the mark
    marks = runtime / "rng" / "marks"
    marks.mkdir(parents=True)
    (marks / "2.abc123").touch()
    resumesteps.after_step(optimizer, (), {})
    body = json.loads((runtime / "rng" / "abc123.rank1.json").read_text())
    assert body["step"] == 2 and body["rank"] == 1
    rngstates.restore_states(body["states"])
    assert _draws([]) == expected


def test_generators_created_after_the_load_get_their_recorded_state(runtime: Path) -> None:
    fake_np = SimpleNamespace(random=SimpleNamespace(default_rng=np.random.default_rng))
    resumehooks.install_numpy(fake_np)  # type: ignore[arg-type]
    first = fake_np.random.default_rng(1)
    first.random(5)
    recorded = [first.bit_generator.state]
    resumestate.state["generators"].clear()
    resumestate.state["pending_generators"] = recorded
    again = fake_np.random.default_rng(1)
    assert again.bit_generator.state == recorded[0]


@pytest.fixture
def slow_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each background hash takes a while, so the script runs on while it is still going."""
    import time

    original = ckptfiles.sha256_of

    def slow(f: Any) -> str:
        time.sleep(0.3)
        return original(f)

    monkeypatch.setattr(ckptfiles, "sha256_of", slow)


def _recorded(runtime: Path) -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in (runtime / "rng").glob("*.rank0.json")}


def test_a_save_returns_before_its_hash_and_the_states_are_on_disk_at_once(
    runtime: Path, tmp_path: Path, slow_hash: None
) -> None:
    import hashlib

    ckpt = tmp_path / "epoch1.pt"
    ckpt.write_bytes(b"weights of epoch 1")
    resumestate.state["step"] = 7
    ckptrecord.record_in_background(ckpt)
    (quick,) = _recorded(runtime).values()  # under the file's stat while the hash runs
    assert quick["step"] == 7 and ckptrecord.pending
    ckptrecord.wait()
    digest = hashlib.sha256(b"weights of epoch 1").hexdigest()
    assert list(_recorded(runtime)) == [f"{digest}.rank0.json"] and not ckptrecord.pending


def test_a_checkpoint_saved_again_to_its_path_while_hashing_keeps_both_hashes_right(
    runtime: Path, tmp_path: Path, slow_hash: None
) -> None:
    import hashlib

    calls: list[str] = []
    save, load = _file_module(calls)
    module = SimpleNamespace(save=save, load=load)
    resumehooks._wrap_checkpoint_io(module, "save", "load", "f")  # type: ignore[arg-type]
    ckpt = tmp_path / "last.pt"
    for epoch in (1, 2):
        resumestate.state["step"] = epoch
        module.save({"epoch": epoch}, ckpt)  # the second overwrites the file the first still hashes
    ckptrecord.wait()
    by_hash = {name.split(".")[0]: body["step"] for name, body in _recorded(runtime).items()}
    assert by_hash == {hashlib.sha256(repr({"epoch": e}).encode()).hexdigest(): e for e in (1, 2)}


def test_a_write_opening_a_checkpoint_still_hashing_waits_for_it(
    runtime: Path, tmp_path: Path, slow_hash: None
) -> None:
    import hashlib

    ckpt = tmp_path / "model.pt"
    ckpt.write_bytes(b"first")
    ckptrecord.record_in_background(ckpt)
    ckptrecord.on_audit("open", (str(ckpt), "wb", 0))  # what the audit hook sees at open(ckpt, "wb")
    assert not ckptrecord.pending
    ckpt.write_bytes(b"second")
    assert list(_recorded(runtime)) == [f"{hashlib.sha256(b'first').hexdigest()}.rank0.json"]


def test_a_checkpoint_renamed_while_hashing_is_recorded_under_its_final_name(
    runtime: Path, tmp_path: Path, slow_hash: None
) -> None:
    tmp = tmp_path / "ckpt.pt.tmp"
    tmp.write_bytes(b"atomic save")
    ckptrecord.record_in_background(tmp)
    final = tmp_path / "ckpt.pt"
    ckptrecord.on_audit("os.replace", (str(tmp), str(final), -1, -1))
    tmp.replace(final)
    ckptrecord.wait()
    (body,) = _recorded(runtime).values()
    assert body["path"] == "ckpt.pt"
    resumestate.state["restored"] = False
    ckptrestore.after_load(final, ckptrestore.before_load(final))
    assert json.loads((runtime / resumestate.EVENTS).read_text())["kind"] == "restored"
