"""torch.compile inside a run (repro.runtime.compiling), against a stand-in of torch's Inductor
wrapper: autotuning turned off in a pinned mode and noted, what compiled recorded, private caches."""

from __future__ import annotations

import os
import sys
import types
from typing import Any

import pytest

from repro.runtime import compiling, contract


class FakeWrapper:
    """The shape of ``torch._TorchCompileInductorWrapper``: mode options land in ``self.config``."""

    def __init__(self, mode: str | None, options: dict[str, Any] | None, dynamic: Any) -> None:
        self.config: dict[str, Any] = {}
        if mode == "max-autotune":
            self.config.update(max_autotune=True, coordinate_descent_tuning=True)
        self.config.update(options or {})

    def __call__(self, model: Any, inputs: Any) -> Any:
        return ("compiled", dict(self.config))


@pytest.fixture
def torch(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    monkeypatch.setattr(compiling, "_seen", {"graphs": 0, "turned_off": set(), "patches": {}})
    config = types.ModuleType("torch._inductor.config")
    config.deterministic = False  # type: ignore[attr-defined]
    config.max_autotune = False  # type: ignore[attr-defined]
    config.fallback_random = False  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch._inductor.config", config)
    fake = types.ModuleType("torch")
    fake._TorchCompileInductorWrapper = type("W", (FakeWrapper,), {})  # type: ignore[attr-defined]
    return fake


def test_a_pinned_mode_turns_autotuning_off_and_records_it(torch: types.ModuleType) -> None:
    knobs: dict[str, Any] = {}
    compiling.install(torch, pinned=True, knobs=knobs)
    wrapper = torch._TorchCompileInductorWrapper("max-autotune", None, None)
    assert wrapper("model", []) == ("compiled", {"max_autotune": False, "coordinate_descent_tuning": False})
    compiling.record(knobs)
    assert knobs["compiled"] is True and knobs["compiler"]
    assert knobs["inductor_autotune_turned_off"] == ["coordinate_descent_tuning", "max_autotune"]
    assert knobs[f"{contract.INDUCTOR_KNOB_PREFIX}deterministic"] is True
    assert knobs[f"{contract.INDUCTOR_KNOB_PREFIX}max_autotune"] is False


def test_mode_off_keeps_what_the_script_asked(torch: types.ModuleType) -> None:
    knobs: dict[str, Any] = {}
    compiling.install(torch, pinned=False, knobs=knobs)
    wrapper = torch._TorchCompileInductorWrapper(None, {"max_autotune": True}, None)
    assert wrapper("model", [])[1] == {"max_autotune": True}
    compiling.record(knobs)
    assert "inductor_autotune_turned_off" not in knobs
    assert knobs[f"{contract.INDUCTOR_KNOB_PREFIX}max_autotune"] is True
    assert knobs[f"{contract.INDUCTOR_KNOB_PREFIX}deterministic"] is False


def test_a_run_that_never_compiles_records_nothing_of_it(torch: types.ModuleType) -> None:
    knobs: dict[str, Any] = {}
    compiling.install(torch, pinned=True, knobs=knobs)
    compiling.record(knobs)
    assert knobs == {}


def test_no_compiler_on_path_is_recorded_as_none(
    torch: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CXX", "no-such-cxx-compiler")
    knobs: dict[str, Any] = {}
    compiling.install(torch, pinned=True, knobs=knobs)
    torch._TorchCompileInductorWrapper(None, None, None)("model", [])
    assert knobs["compiler"] == contract.NO_COMPILER


def test_each_run_gets_caches_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in compiling.CACHE_VARIABLES:
        monkeypatch.setenv(name, "/shared/cache")
    compiling.private_caches()
    first = {name: os.environ[name] for name in compiling.CACHE_VARIABLES}
    compiling.private_caches()
    second = {name: os.environ[name] for name in compiling.CACHE_VARIABLES}
    assert "/shared/cache" not in first.values() and first != second
    assert len({os.path.dirname(p) for p in first.values()}) == 1


def test_no_compiler_is_the_failure_named_with_its_fix() -> None:
    from repro.run.collect_env import compile_warnings
    from repro.store.record import ImageInfo, Record

    record = Record(id="20260101-000000-abcd", created="2026-01-01T00:00:00Z")
    record.deps.image = ImageInfo(base="python:3.11-slim")
    record.results.status = "failed"
    compile_warnings(record, contract.NO_COMPILER)
    failure = record.results.failure or {}
    assert failure["code"] == "no_compiler" and "python:3.11-slim has none" in failure["message"]
    assert "repro base-image" in failure["hint"] and record.warnings == []


def test_autotuning_turned_off_is_said_in_one_line() -> None:
    from repro.run.collect_env import compile_warnings
    from repro.store.record import Record

    record = Record(id="20260101-000000-abcd", created="2026-01-01T00:00:00Z")
    record.determinism.knobs["inductor_autotune_turned_off"] = ["max_autotune"]
    compile_warnings(record, "g++ 12.2.0")
    assert [w.code for w in record.warnings] == ["compile_autotune_off"]
    assert "max_autotune" in record.warnings[0].message and "\n" not in record.warnings[0].message
