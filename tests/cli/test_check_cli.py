"""`repro check` through the CLI entry point, on real (tiny, torch-free) commands in a temp git project."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from repro.store.runs import Store

# Seeded by repro's runtime: the same seed gives the same bytes and the same stdout.
SEEDED = """\
import random
from pathlib import Path

Path("outputs").mkdir(exist_ok=True)
Path("outputs/weights.txt").write_text(repr([random.random() for _ in range(4)]))
Path("outputs/config.txt").write_text("lr 0.1\\n")
print("final", random.random() * SCALE)
"""


def _seeded(project, scale: str = "1") -> None:  # type: ignore[no-untyped-def]
    project.write("train.py", "SCALE = " + scale + "\n" + SEEDED)


def test_a_seeded_command_reproduces(project, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _seeded(project)
    project.commit("seeded")
    junit, md = tmp_path / "report.xml", tmp_path / "summary.md"

    r = cli("check", "--backend", "local", "--junit", str(junit), "--markdown", str(md), "--",
            "python", "train.py", cwd=project.root)  # fmt: skip

    assert r.code == 0, r.err
    assert r.out.startswith("IDENTICAL")
    assert "2 output" in r.out
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("4", "0")
    assert md.read_text().startswith("## ✅ Reproduced: identical")
    rows = Store(project.root).rows()
    assert [row.kind for row in rows] == ["check", "check"]
    assert {row.parent for row in rows} == {None, next(row.id for row in rows if row.parent is None)}
    first = next(row for row in rows if row.parent is None)
    later = next(row for row in rows if row.parent is not None)
    assert (first.verdict, later.verdict) == (None, "identical")  # written into the record before sealing
    verification = Store(project.root).load_run(later.id).record.verification
    assert verification is not None and verification["of"] == first.id
    listing = cli("ls", cwd=project.root)
    assert f"(check of {first.id}: identical)" in listing.out


def test_os_entropy_fails_with_exit_five_naming_the_output(project, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    project.script("entropy.py")
    project.commit("entropy")
    junit = tmp_path / "report.xml"

    r = cli("check", "--backend", "local", "--runs", "3", "--junit", str(junit), "--", "python", "entropy.py",
            cwd=project.root)  # fmt: skip

    assert r.code == 5
    assert r.out.startswith("DIVERGED")
    assert "outputs that differ: outputs/noise.bin" in r.out
    assert "output outputs/noise.bin changed" in r.out  # the first divergence
    root = ET.parse(junit).getroot()
    cases = root.findall(".//testcase")
    assert len(cases) == 2 * 3  # runs 2 and 3 against run 1: one output, metrics, stdout each
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert failed == ["run 1 vs run 2: output outputs/noise.bin", "run 1 vs run 3: output outputs/noise.bin"]
    assert sorted(str(row.verdict) for row in Store(project.root).rows()) == ["None", "diverged", "diverged"]


def test_one_seed_for_every_run(project, cli) -> None:  # type: ignore[no-untyped-def]
    _seeded(project)
    project.commit("seeded")

    r = cli(
        "check", "--backend", "local", "--seed", "7", "--json", "--", "python", "train.py", cwd=project.root
    )

    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert (data["status"], data["exit_code"], data["seed"], data["kind"]) == ("identical", 0, 7, "repeat")
    seeds = {Store(project.root).load_run(i).record.seeds.master for i in data["run_ids"]}
    assert seeds == {7}


def test_a_failing_command_exits_four(project, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    project.script("crash.py")
    project.commit("crash")
    junit = tmp_path / "report.xml"

    r = cli(
        "check", "--backend", "local", "--junit", str(junit), "--", "python", "crash.py", cwd=project.root
    )

    assert r.code == 4
    assert "boom: the loss went to NaN" in r.err
    assert len(Store(project.root).rows()) == 1  # the check stops at the first failing run
    failure = ET.parse(junit).getroot().find(".//failure")
    assert failure is not None and "boom" in (failure.text or "")


def test_against_a_golden_capsule(project, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _seeded(project)
    project.commit("seeded")
    assert (
        cli("run", "--backend", "local", "--seed", "3", "--", "python", "train.py", cwd=project.root).code
        == 0
    )
    golden = tmp_path / "golden.tar"
    assert cli("export", "latest", "-o", str(golden), cwd=project.root).code == 0

    ok = cli("check", "--against", str(golden), "--backend", "local", cwd=project.root)
    assert ok.code == 0, ok.err
    assert "IDENTICAL" in ok.out

    _seeded(project, scale="2")
    head = project.commit("scale the output")
    md = tmp_path / "summary.md"
    bad = cli(
        "check", "--against", str(golden), "--backend", "local", "--markdown", str(md), cwd=project.root
    )

    assert bad.code == 5
    assert "DIVERGED" in bad.out
    assert "What changed since the capsule" in bad.out
    assert "code changed" in bad.out and "train.py" in bad.out and head[:12] in bad.out
    assert "### What changed since the capsule" in md.read_text()
    kinds = sorted(row.kind for row in Store(project.root).rows())  # ids in one second sort at random
    assert kinds == ["check", "check", "run"]


def test_against_leaves_the_working_tree_alone(project, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _seeded(project)
    project.commit("seeded")
    cli("run", "--backend", "local", "--", "python", "train.py", cwd=project.root)
    golden = tmp_path / "golden.tar"
    cli("export", "latest", "-o", str(golden), cwd=project.root)
    weights = project.root / "outputs" / "weights.txt"
    weights.write_text("mine")
    project.write("train.py", "SCALE = 5\n" + SEEDED)  # uncommitted: checked as it is

    r = cli("check", "--against", str(golden), "--backend", "local", cwd=project.root)

    assert r.code == 5
    assert weights.read_text() == "mine"
    assert (project.root / "train.py").read_text().startswith("SCALE = 5")


def test_usage_errors_exit_two(project, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("check", cwd=project.root).code == 2
    both = cli("check", "--against", "x.tar", "--", "python", "t.py", cwd=project.root)
    assert both.code == 2 and "not both" in both.err
    assert cli("check", "--runs", "1", "--", "python", "t.py", cwd=project.root).code == 2
    control = cli("check", "--control", "--", "python", "t.py", cwd=project.root)
    assert control.code == 2 and "--control is the negative control of an interrupt check" in control.err
    assert "repro check --interrupt 1 --control" in control.err  # the hint


def test_a_missing_capsule_is_a_usage_error(project, cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("check", "--against", "nope", cwd=project.root)
    assert r.code == 2


def test_help_documents_the_exit_codes(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("check", "--help")
    assert r.code == 0
    for line in (
        "0    reproduced",
        "4    the training command failed",
        "5    not reproduced",
        "130  interrupted",
    ):
        assert line in r.out
