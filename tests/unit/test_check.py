"""`repro.check`: the result's status and exit code, and the JUnit XML built from it."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from repro.check import CheckResult, output_fails, run_check
from repro.compare.verdict import Side, Verdict, compare_runs
from repro.config import Plan
from repro.errors import ExitCode, UsageError
from repro.run.prepared import RunRequest
from repro.store.record import FileEntry, Record
from repro.store.runs import Store
from repro.ui.check import render_junit


def _side(label: str, tmp: Path, files: dict[str, bytes], stdout: str = "ok\n", loss: float = 0.5) -> Side:
    entries = []
    for name, data in files.items():
        path = tmp / label / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        entries.append(FileEntry(f"outputs/{name}", len(data), f"h-{hash(data) & 0xFFFF:x}", True))
    paths = {e.path: tmp / label / e.path.split("/", 1)[1] for e in entries}
    return Side(
        label=label,
        outputs=entries,
        open_output=lambda e: paths.get(e.path),
        metrics=[{"name": "loss", "value": loss, "step": 0}],
        stdout=stdout,
        exit_code=0,
    )


def _verdicts(tmp_path: Path, *, same: bool) -> list[Verdict]:
    a = _side("a", tmp_path, {"x.txt": b"1", "y.txt": b"2"})
    if same:
        b = _side("b", tmp_path, {"x.txt": b"1", "y.txt": b"2"})
    else:
        b = _side("b", tmp_path, {"x.txt": b"1", "y.txt": b"3"}, stdout="other\n", loss=0.25)
    return [compare_runs(a, b, "strict")]


def test_identical_result_exits_zero_and_junit_has_no_failures(tmp_path: Path) -> None:
    result = CheckResult(kind="repeat", mode="strict", verdicts=_verdicts(tmp_path, same=True))

    assert (result.status, result.exit_code, result.differing_outputs()) == ("identical", ExitCode.OK, [])
    suite = ET.fromstring(render_junit(result)).find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "run 1 vs run 2: output outputs/x.txt",
        "run 1 vs run 2: output outputs/y.txt",
        "run 1 vs run 2: metrics",
        "run 1 vs run 2: stdout",
    ]
    assert (suite.get("tests"), suite.get("failures")) == ("4", "0")
    assert not suite.findall(".//failure")


def test_diverged_result_exits_five_and_junit_carries_each_reason(tmp_path: Path) -> None:
    result = CheckResult(kind="repeat", mode="strict", verdicts=_verdicts(tmp_path, same=False))

    assert (result.status, result.exit_code) == ("diverged", ExitCode.NOT_REPRODUCED)
    assert result.differing_outputs() == ["outputs/y.txt"]
    suite = ET.fromstring(render_junit(result)).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures")) == ("4", "3")
    failing = {c.get("name"): c.find("failure") for c in suite.findall("testcase")}
    assert failing["run 1 vs run 2: output outputs/x.txt"] is None
    y = failing["run 1 vs run 2: output outputs/y.txt"]
    assert y is not None and "outputs/y.txt" in (y.get("message") or "")
    metrics = failing["run 1 vs run 2: metrics"]
    assert metrics is not None and "loss" in (metrics.get("message") or "")
    stdout = failing["run 1 vs run 2: stdout"]
    assert stdout is not None and "- ok" in (stdout.text or "") and "+ other" in (stdout.text or "")


def test_a_failed_command_is_one_failing_testcase_and_exit_four() -> None:
    record = Record(id="20250101-000000-abcd", created="2025-01-01T00:00:00+00:00")
    record.results.status, record.results.exit_code = "failed", 3
    record.results.stderr_tail = ["Traceback", "boom"]
    result = CheckResult(kind="repeat", mode="strict", records=[record], failed=record)

    assert (result.status, result.exit_code) == ("failed", ExitCode.COMMAND_FAILED)
    root = ET.fromstring(render_junit(result))
    assert (root.get("tests"), root.get("failures")) == ("1", "1")
    failure = root.find(".//failure")
    assert failure is not None and "exit status 3" in (failure.get("message") or "")
    assert "boom" in (failure.text or "")


def test_against_testcases_are_named_for_the_capsule(tmp_path: Path) -> None:
    result = CheckResult(
        kind="against", mode="strict", verdicts=_verdicts(tmp_path, same=True), capsule="g.tar"
    )
    names = [c.get("name") for c in ET.fromstring(render_junit(result)).iter("testcase")]
    assert names[0] == "capsule vs current code: output outputs/x.txt"


def test_outside_strict_mode_an_output_within_tolerance_does_not_fail(tmp_path: Path) -> None:
    v = _verdicts(tmp_path, same=False)[0]
    changed = next(o for o in v.outputs if o.status == "changed")
    assert output_fails(v, changed)
    v.mode = "gpu"
    changed.tensors = None
    assert output_fails(v, changed)  # not a tensor file: no tolerance applies


def test_fewer_than_two_runs_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="at least two runs"):
        run_check(RunRequest(argv=["python", "t.py"], cwd=tmp_path), Store(tmp_path), Plan(()), print, runs=1)


def test_junit_picks_each_testcase_reason_by_code_not_by_wording(tmp_path: Path) -> None:
    (v,) = _verdicts(tmp_path, same=False)
    for r in v.reasons:  # reword every sentence: the JUnit reasons must follow the codes and paths
        r.message = f"[{r.code}] reworded"
    result = CheckResult(kind="repeat", mode="strict", verdicts=[v])
    suite = ET.fromstring(render_junit(result)).find("testsuite")
    assert suite is not None
    failing = {c.get("name"): c.find("failure") for c in suite.findall("testcase")}
    messages = {name: (f.get("message") if f is not None else None) for name, f in failing.items()}
    assert messages == {
        "run 1 vs run 2: output outputs/x.txt": None,
        "run 1 vs run 2: output outputs/y.txt": "[output_differs] reworded",
        "run 1 vs run 2: metrics": "[metric_differs] reworded",
        "run 1 vs run 2: stdout": "[log_differs] reworded",
    }


def test_an_interrupt_check_gives_every_resumes_state_per_rank_in_json() -> None:
    from repro.compare.resumetrace import RankState, ResumeCause, ResumeComparison
    from repro.ui.check import render_json

    cause = ResumeCause(9, 1, "sampler", "sampler", [2], [0])
    result = CheckResult(kind="interrupt", mode="strict")
    result.states = [
        ResumeComparison("run-b", 8, "", [RankState(0, 4), RankState(1, 4)]),
        ResumeComparison("run-d", 8, "sampler", [RankState(0, 4), RankState(1, 4, cause)]),
    ]
    data = render_json(result)
    ordinary, spoiled = data["states"]
    assert ordinary["control"] is None and [r["same"] for r in ordinary["ranks"]] == [True, True]
    assert spoiled["control"] == "sampler" and spoiled["ranks"][1]["path"] == "sampler.epoch 2 vs 0"
    assert spoiled["ranks"][1]["text"] == "rank 1: sampler.epoch 2 vs 0 at optimizer step 9"
    from tests.cli.test_json_answers import valid  # the answer against its schema

    valid("check", json.dumps(data))


def test_the_text_of_an_interrupt_check_gives_each_resumes_state_per_rank() -> None:
    from repro.compare.resumetrace import RankState, ResumeCause, ResumeComparison
    from repro.ui.check import render_text

    result = CheckResult(kind="interrupt", mode="strict")
    cause = ResumeCause(9, 1, "rng:torch", "rng.torch", "a", "b")
    result.states = [
        ResumeComparison("run-b", 8, "", [RankState(0, 4), RankState(1, 4)]),
        ResumeComparison("run-c", 8, "", [RankState(0, 4), RankState(1, 4, cause)]),
        ResumeComparison("run-d", 8, "rng", [RankState(0, 4, cause)]),
    ]
    result.verdicts = [Verdict(status="identical", mode="strict", original="run-a", replay="run-b")]
    lines = render_text(result, colour=False, width=None).splitlines()
    same = "every rank's state the same from the resume point (steps rank 0: 4, rank 1: 4)"
    assert f"  resume run-b: {same}" in lines
    assert "  resume run-c: rank 1: rng.torch differs at optimizer step 9" in lines
    assert not any("run-d" in line for line in lines)  # a control's state is on its own line
