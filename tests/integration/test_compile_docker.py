"""`torch.compile` inside the capsule, on docker in strict mode: scripts in the shape of public code
(nanoGPT's `--compile`, a CNN compiled with `mode="max-autotune"`, a compiled loss function) run in a
container, replay `identical` in another, record the compiler and the Inductor settings, and a
compiled run against an eager one of the same seed names the compile as a cause.

Compiles are slow on a small machine: one module-scoped project, and per script one module-scoped
fixture that makes one run of each kind.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from repro.backends.baseimage import COMPILER_LABEL
from repro.backends.docker.engine import engine, engine_available
from repro.config import DEFAULT_BASE_IMAGE
from tests.conftest import Project

# The first of a script's tests makes its runs (three compiles; the first also builds the image).
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(1800)]

BASE = os.environ.get("REPRO_BASE_IMAGE") or DEFAULT_BASE_IMAGE
# (script, the arguments of its compiled run, of its eager run, the output it saves)
SCRIPTS = {
    "nanogpt": ("nanogpt_compile.py", ["--compile"], [], "out/ckpt.pt"),
    "cnn": ("cnn_autotune.py", [], ["--eager"], "checkpoints/cnn.pt"),
    "loss": ("loss_compile.py", [], ["--eager"], "model.pt"),
}


def _base_compiler() -> str | None:
    if not engine_available():
        pytest.skip("no Docker engine answers (bash scripts/docker-up.sh starts one)")
    with engine() as client:
        try:
            labels = client.api.inspect_image(BASE).get("Config", {}).get("Labels") or {}
        except Exception:
            pytest.skip(f"the engine has no base image {BASE} (bash scripts/docker-up.sh makes it)")
    return labels.get(COMPILER_LABEL)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """One project holding the three scripts and the quick-start's torch lock (one image for all)."""
    compiler = _base_compiler()
    if not compiler:
        pytest.skip(f"the base image {BASE} has no C++ compiler (bash scripts/docker-up.sh remakes it)")
    found = Project.init(tmp_path_factory.mktemp("compile") / "proj")
    found.write(".gitignore", "out/\ncheckpoints/\nmodel.pt\n")
    for script, *_ in SCRIPTS.values():
        found.script(script)
    found.lock_torch()
    found.commit("compiled training")
    return found


@pytest.fixture(scope="module", params=list(SCRIPTS))
def runs(request: pytest.FixtureRequest, project: Project) -> dict[str, Any]:
    """One script's compiled run, its replay in another container, its eager run, and their diff."""
    script, compiled, eager, output = SCRIPTS[request.param]
    entry: dict[str, Any] = {"name": request.param, "output": output}
    for kind, extra in (("compiled", compiled), ("eager", eager)):
        r = project.repro("run", "--backend", "docker", "--seed", "5", "--", "python", script, *extra)
        assert r.code == 0, r.err[-3000:]
        entry[kind] = json.loads(project.repro("show", "latest", "--json").out)
        entry[f"{kind}_err"] = r.err
    r = project.repro("replay", entry["compiled"]["id"], "--json")
    assert r.code == 0, r.out[-2000:] + r.err[-2000:]
    entry["replay"] = json.loads(r.out)
    entry["replay_record"] = json.loads(project.repro("show", "latest", "--json").out)
    r = project.repro("diff", entry["compiled"]["id"], entry["eager"]["id"], "--json")
    entry["diff"] = json.loads(r.out)
    return entry


def _output(record: dict[str, Any], path: str) -> str:
    return str(next(o["hash"] for o in record["results"]["outputs"] if o["path"] == path))


def test_a_compiled_run_replays_identical_in_another_container(runs: dict[str, Any]) -> None:
    entry = runs
    assert entry["replay"]["status"] == "identical"
    assert entry["replay_record"]["backend"]["name"] == "docker"
    assert _output(entry["replay_record"], entry["output"]) == _output(entry["compiled"], entry["output"])


def test_the_record_says_it_compiled_with_which_compiler_and_settings(runs: dict[str, Any]) -> None:
    compiled, eager = runs["compiled"], runs["eager"]
    knobs = compiled["determinism"]["knobs"]
    assert knobs["compiled"] is True and compiled["env"]["compiler"].startswith("g++ ")
    assert knobs["inductor.deterministic"] is True and knobs["inductor.max_autotune"] is False
    assert "compiled" not in eager["determinism"]["knobs"] and eager["env"]["compiler"] is None


def test_max_autotune_is_turned_off_in_strict_mode_and_said_once(runs: dict[str, Any]) -> None:
    said = [line for line in runs["compiled_err"].splitlines() if "turned it off" in line]
    turned_off = runs["compiled"]["determinism"]["knobs"].get("inductor_autotune_turned_off")
    if runs["name"] == "cnn":  # the one that asks for mode="max-autotune"
        assert "max_autotune" in turned_off
        assert len(said) == 1 and "max_autotune" in said[0]
    else:
        assert turned_off is None and said == []


def test_compiled_against_eager_names_the_compile(runs: dict[str, Any]) -> None:
    diff = runs["diff"]
    assert diff["differs"] is True
    reasons = " ".join(c["reason"] for c in diff["likely_causes"] + diff["without_effect"])
    assert "compiled" in reasons and "compiler" in reasons
