"""What `repro diff` writes beside the terminal: text cut only for a terminal (a file or a CI log keeps
every reason whole, whatever COLUMNS says; --json, --markdown and JUnit never cut), and an --html page
that a --plot with no curves does not prevent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.cli import main
from repro.compare.verdict import Verdict
from repro.diff import diff_records
from repro.store.record import CommandInfo, Record, ResultInfo
from repro.store.runs import Store
from repro.ui import check as check_ui
from repro.ui import diff as diff_ui
from repro.ui import verdict as verdict_ui

# A long data path, as a cluster job passes it: the reason a diff gives is longer than 100 columns.
OLD = "/scratch/project-4711/datasets/imagenet-1k/preprocessed/train-shards-v3/resized-256-center-crop"
NEW = "/scratch/project-4711/datasets/imagenet-1k/preprocessed/train-shards-v4/resized-288-random-crop"


def _record(store: Store, run_id: str, data_dir: str, loss: str) -> Record:
    return Record(
        id=run_id,
        created="2025-01-01T12:00:00Z",
        command=CommandInfo(
            argv=["python", "main.py", "--data_dir", data_dir], params={"data_dir": data_dir}
        ),
        results=ResultInfo(
            status="succeeded",
            exit_code=0,
            logs={"stdout": store.put_bytes(f"Epoch: [0]  Loss {loss}  Acc@1 12.5 ({data_dir})\n".encode())},
        ),
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    store = Store(tmp_path)
    store.ensure()
    for run_id, data_dir, loss in (
        ("20250101-120000-aaaa", OLD, "6.8812"),
        ("20250101-130000-bbbb", NEW, "6.9034"),
    ):
        record = _record(store, run_id, data_dir, loss)
        store.seal(record, store.begin_run(record.id, record.command.argv))
    return tmp_path


def _repro(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(list(args)) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("columns", [None, "80", "400"])
def test_diff_to_a_file_keeps_every_reason_whole(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, columns: str | None
) -> None:
    if columns is not None:
        monkeypatch.setenv("COLUMNS", columns)
    out = _repro(capsys, "-C", str(project), "diff", "latest~1", "latest")
    assert f"{OLD} → {NEW}" in out
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) > 200


def test_markdown_and_json_keep_values_whole(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    md = _repro(capsys, "-C", str(project), "diff", "latest~1", "latest", "--markdown")
    assert OLD in md and NEW in md and "…" not in md
    data = json.loads(_repro(capsys, "-C", str(project), "diff", "latest~1", "latest", "--json"))
    assert data["likely_causes"][0]["reason"].endswith(f"{OLD} → {NEW}")


def test_a_terminal_gets_lines_cut_at_its_width(project: Path) -> None:
    store = Store(project)
    a, b = (store.resolve(ref) for ref in ("latest~1", "latest"))
    result = diff_records(a.record, b.record, a.read_blob)
    cut = diff_ui.render_text(result, width=100)
    assert max(len(line) for line in cut.splitlines()) <= 100 and "…" in cut
    assert "…" not in diff_ui.render_text(result, width=None)


def test_a_verdict_and_a_junit_failure_keep_the_reason_whole() -> None:
    reason = f"output {NEW}/checkpoint_best.pth.tar: tensor module.layer4.2.bn3.running_var max abs 0.0031"
    verdict = Verdict(
        status="diverged", mode="strict", original="a", replay="b", summary=f"diverged: {reason}"
    )
    assert reason in verdict_ui.render_text(verdict, width=None)
    assert reason not in verdict_ui.render_text(verdict, width=100)
    from repro.check import CheckResult

    result = CheckResult(kind="repeat", mode="strict", records=[], verdicts=[verdict], seed=1)
    assert reason in check_ui.render_failure(result)


def test_plot_with_no_curves_leaves_the_html_page_written(
    project: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Neither run logged a metric series: the plot is a warning, the page is still written."""
    page, png = tmp_path / "report.html", tmp_path / "curves.png"
    args = ["-C", str(project), "diff", "latest~1", "latest", "--plot", str(png), "--html", str(page)]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 0 and page.is_file() and not png.exists()
    assert "no curves drawn to" in err
    assert "no curves: neither run has a metric series" in page.read_text()
