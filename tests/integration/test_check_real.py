"""`repro check` on real torch training, through the real `repro` command in subprocesses."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from repro.store.runs import Store

pytestmark = pytest.mark.slow

TRAIN = ["python", "train_unseeded.py", "--epochs", "1"]


def test_unseeded_torch_training_with_workers_reproduces_under_repro(project, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    project.script("train_unseeded.py")
    project.points()
    project.commit("train")
    junit = tmp_path / "report.xml"

    r = project.repro("check", "--backend", "local", "--data", "data", "--junit", str(junit), "--",
                      *TRAIN, "--workers", "2")  # fmt: skip

    assert r.code == 0, r.err
    assert r.out.startswith("IDENTICAL")
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    names = [c.get("name") for c in suite.findall("testcase")]
    assert "run 1 vs run 2: output outputs/model.pt" in names
    assert "run 1 vs run 2: output outputs/summary.txt" in names
    assert (suite.get("tests"), suite.get("failures")) == ("4", "0")
    runs = [Store(project.root).load_run(row.id).record for row in Store(project.root).rows()]
    assert [run.kind for run in runs] == ["check", "check"]
    assert runs[0].results.outputs == runs[1].results.outputs  # same hashes, two separate processes


def test_os_entropy_fails_naming_the_output(project, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    project.script("entropy.py")
    project.commit("entropy")
    junit = tmp_path / "report.xml"

    r = project.repro("check", "--backend", "local", "--junit", str(junit), "--", "python", "entropy.py")

    assert r.code == 5, r.err
    assert "outputs/noise.bin" in r.out.splitlines()[3]  # in the summary of the verdict, under the head
    root = ET.parse(junit).getroot()
    assert (root.get("tests"), root.get("failures")) == ("3", "1")


def test_golden_capsule_gates_a_code_change(project, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    project.script("train_unseeded.py")
    project.points()
    project.commit("train")
    assert (
        project.repro("run", "--backend", "local", "--data", "data", "--", *TRAIN, "--workers", "0").code == 0
    )
    golden = project.root / "golden" / "capsule.tar"
    golden.parent.mkdir()
    assert project.repro("export", "latest", "-o", str(golden)).code == 0
    project.commit("golden capsule")  # committed next to the code, as in CI

    same = project.repro("check", "--against", "golden/capsule.tar", "--backend", "local")
    assert same.code == 0, same.out + same.err
    assert "IDENTICAL" in same.out

    script = project.root / "train_unseeded.py"
    script.write_text(script.read_text().replace("default=0.05", "default=0.07"))
    project.commit("raise the default learning rate")
    changed = project.repro("check", "--against", "golden/capsule.tar", "--backend", "local")

    assert changed.code == 5, changed.err
    assert "DIVERGED" in changed.out
    assert "outputs/model.pt" in changed.out
    after = changed.out.split("What changed since the capsule", 1)[1]
    assert "code changed" in after and "train_unseeded.py" in after
    assert "golden/capsule.tar" not in after  # the capsule itself is not code
