"""Every command resolves its settings the same way: flag > REPRO_* > repro.yaml > default.

Real runs of a tiny torch-free script on the local backend; what each run used is read back
from its sealed record.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.pytest_plugin import ReproCheck
from repro.store.runs import Store

SEEDED = """\
import argparse
import random
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--save", default="outputs/weights.txt")
args = parser.parse_args()
Path(args.save).parent.mkdir(exist_ok=True)
Path(args.save).write_text(repr([random.random() for _ in range(4)]))
print("loss", random.random())
"""


@pytest.fixture
def seeded(project, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    for var in ("REPRO_MODE", "REPRO_SEED_DEFAULT", "REPRO_BACKEND", "REPRO_THREADS", "REPRO_ISA"):
        monkeypatch.delenv(var, raising=False)
    project.write("train.py", SEEDED)
    project.write("repro.yaml", "backend: local\nmode: off\nseed: 5\n")
    project.commit("seeded")
    return project


def _used(root: Path, run_id: str) -> tuple[str, int]:
    record = Store(root).load_run(run_id).record
    return record.determinism.mode, record.seeds.master


def _run(cli, root: Path, *flags: str) -> tuple[str, int]:  # type: ignore[no-untyped-def]
    r = cli("run", "--json", *flags, "--", "python", "train.py", cwd=root)
    assert r.code == 0, r.err
    return _used(root, json.loads(r.out)["id"])


def _check(cli, root: Path, *flags: str) -> set[tuple[str, int]]:  # type: ignore[no-untyped-def]
    r = cli("check", "--json", *flags, "--", "python", "train.py", cwd=root)
    assert r.code == 0, r.err
    return {_used(root, run_id) for run_id in json.loads(r.out)["run_ids"]}


def test_run(seeded, cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    assert _run(cli, seeded.root) == ("off", 5)
    monkeypatch.setenv("REPRO_MODE", "strict")
    monkeypatch.setenv("REPRO_SEED_DEFAULT", "6")
    assert _run(cli, seeded.root) == ("strict", 6)
    assert _run(cli, seeded.root, "--mode", "off", "--seed", "7") == ("off", 7)


def test_check(seeded, cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    assert _check(cli, seeded.root) == {("off", 5)}
    monkeypatch.setenv("REPRO_MODE", "strict")
    monkeypatch.setenv("REPRO_SEED_DEFAULT", "6")
    assert _check(cli, seeded.root) == {("strict", 6)}
    assert _check(cli, seeded.root, "--mode", "off", "--seed", "7") == {("off", 7)}


def test_replay(seeded, cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Backend: flag > REPRO_BACKEND > the record > repro.yaml; a dead DOCKER_HOST shows docker was tried."""
    assert _run(cli, seeded.root)[0] == "off"
    seeded.write("repro.yaml", "backend: docker\nmode: off\nseed: 5\n")
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")  # nothing listens: docker is unavailable

    recorded = cli("replay", "--json", cwd=seeded.root)
    assert recorded.code == 0, recorded.err
    assert json.loads(recorded.out)["status"] == "identical"

    monkeypatch.setenv("REPRO_BACKEND", "docker")
    env = cli("replay", cwd=seeded.root)
    assert env.code == 3 and "Docker engine" in env.err

    flag = cli("replay", "--backend", "local", "--json", cwd=seeded.root)
    assert flag.code == 0, flag.err
    replay = Store(seeded.root).load_run(json.loads(flag.out)["replay_id"]).record
    assert (replay.backend.name, replay.backend.requested) == ("local", "local")


FAILS_ONCE = """\
import random
import sys
from pathlib import Path

marker = Path("outputs/started")
first = not marker.exists()
marker.parent.mkdir(exist_ok=True)
marker.write_text("started")
print("loss", random.random())
sys.exit(1 if first else 0)
"""


def _failed_run(cli, root: Path) -> str:  # type: ignore[no-untyped-def]
    (root / "outputs" / "started").unlink(missing_ok=True)
    r = cli("run", "--backend", "local", "--json", "--", "python", "once.py", cwd=root)
    assert r.code == 4, r.err
    return str(json.loads(r.out)["id"])


def _resumed(cli, root: Path, *flags: str) -> tuple[str, str, str, int]:  # type: ignore[no-untyped-def]
    r = cli("resume", "--json", *flags, cwd=root)
    assert r.code == 0, r.err
    record = Store(root).load_run(json.loads(r.out)["id"]).record
    return record.backend.name, record.backend.requested or "", record.determinism.mode, record.seeds.master


def test_resume(seeded, cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Backend: flag > REPRO_BACKEND > the record > repro.yaml; seed and mode are always the record's."""
    seeded.write("once.py", FAILS_ONCE)
    seeded.write("repro.yaml", "backend: docker\nmode: off\nseed: 5\n")
    seeded.write(".gitignore", "outputs/\n")
    seeded.commit("fails once")
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")  # nothing listens: docker is unavailable

    _failed_run(cli, seeded.root)
    assert _resumed(cli, seeded.root) == ("local", "local", "off", 5)  # the record, not repro.yaml

    _failed_run(cli, seeded.root)
    monkeypatch.setenv("REPRO_BACKEND", "docker")
    monkeypatch.setenv("REPRO_MODE", "strict")
    monkeypatch.setenv("REPRO_SEED_DEFAULT", "6")
    env = cli("resume", cwd=seeded.root)
    assert env.code == 3 and "Docker engine" in env.err
    assert _resumed(cli, seeded.root, "--backend", "local") == ("local", "local", "off", 5)


def test_pytest_fixture(seeded, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    check = ReproCheck(backend=None, base=seeded.root, ini_backend="local")
    first = check("python train.py")
    assert (first.mode, first.seed) == ("off", 5)
    monkeypatch.setenv("REPRO_MODE", "strict")
    assert check("python train.py").mode == "strict"
    assert check("python train.py", mode="off", seed=7).seed == 7


PRINTS_ENTROPY = """\
import os
from pathlib import Path

Path("model.txt").write_text("weights 1 2 3")
print("worker token", os.urandom(6).hex())
"""


def test_compare_stdout(seeded, cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A line that differs every run: flag > REPRO_COMPARE_STDOUT > repro.yaml, for replay and check."""
    seeded.write("entropy.py", PRINTS_ENTROPY)
    seeded.write(".gitignore", "model.txt\n")
    seeded.commit("entropy")
    assert cli("run", "--", "python", "entropy.py", cwd=seeded.root).code == 0

    def replay(*flags: str) -> tuple[int, str]:
        r = cli("replay", "--json", *flags, cwd=seeded.root)
        return r.code, json.loads(r.out)["status"]

    def check(*flags: str) -> int:
        return int(cli("check", *flags, "--", "python", "entropy.py", cwd=seeded.root).code)

    assert replay() == (5, "diverged") and check() == 5
    assert replay("--no-compare-stdout") == (0, "identical") and check("--no-compare-stdout") == 0
    monkeypatch.setenv("REPRO_COMPARE_STDOUT", "0")
    assert replay() == (0, "identical") and check() == 0
    assert replay("--compare-stdout") == (5, "diverged") and check("--compare-stdout") == 5
    monkeypatch.delenv("REPRO_COMPARE_STDOUT")
    seeded.write("repro.yaml", "backend: local\nmode: off\nseed: 5\ncompare:\n  stdout: false\n")
    assert replay() == (0, "identical")


STEPPED = """\
for epoch in range(3):
    print(f"Train Epoch: {epoch} [0/60000 (0%)]\\tLoss: {1.0 / (epoch + 1):.6f}")
    print(f"iter {epoch}: loss {2.0 / (epoch + 1):.4f}")
"""


def test_metrics_from_and_patterns_in_repro_yaml_decide_what_is_harvested(project, cli) -> None:  # type: ignore[no-untyped-def]
    project.write("train.py", STEPPED)
    project.write(
        "repro.yaml",
        "backend: local\nmetrics:\n  from: [stdout]\n"
        "  patterns: ['Train Epoch: (?P<step>\\d+) .*Loss: (?P<nll>[\\d.]+)']\n",
    )
    project.commit("stepped")
    assert cli("run", "--", "python", "train.py", cwd=project.root).code == 0
    series = {s.name: s for s in Store(project.root).resolve("latest").record.results.series}
    nll = series["nll"]
    assert (nll.points, nll.last_step) == (3, 2) and nll.last == pytest.approx(1 / 3, 1e-5)
    assert series["loss"].source == "stdout" and series["loss"].points == 3
    project.write("repro.yaml", "backend: local\nmetrics:\n  from: []\n")
    project.commit("nothing harvested")
    assert cli("run", "--", "python", "train.py", cwd=project.root).code == 0
    assert Store(project.root).resolve("latest").record.results.series == []


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("metrics:\n  from: [tensorbord]\n", "metrics.from: unknown source 'tensorbord'"),
        (
            "metrics:\n  patterns: ['loss (']\n",
            "metrics.patterns: 'loss (' is not a valid regular expression",
        ),
        ("metrics:\n  patterns: ['loss \\\\d+']\n", "names no series"),
    ],
)
def test_bad_metrics_settings_are_usage_errors(project, cli, yaml_text: str, message: str) -> None:  # type: ignore[no-untyped-def]
    project.write("train.py", STEPPED)
    project.write("repro.yaml", "backend: local\n" + yaml_text)
    project.commit("bad")
    r = cli("run", "--", "python", "train.py", cwd=project.root)
    assert r.code == 2 and message in r.err
