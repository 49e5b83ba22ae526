"""Figures, reports and archives whose bytes carry the time they were written: a replay in another
process, minutes later, is identical. SOURCE_DATE_EPOCH from the record makes Matplotlib's own dates
equal; what no tool takes from it (a date the script chose, gzip and zip times) is left out by content.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.builders import show_json
from tests.conftest import Project

pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install 'repro-capsule[plot]')")

pytestmark = pytest.mark.slow


def _outputs(record: dict[str, Any]) -> dict[str, str]:
    return {o["path"]: o["hash"] for o in record["results"]["outputs"]}


def test_figures_reports_and_archives_replay_identical_naming_what_was_left_out(project: Project) -> None:
    project.script("plot_report.py", "train.py")
    project.commit("train")
    r = project.repro(
        "run", "--backend", "local", "--seed", "3", "--", "python", "train.py", "--epochs", "15"
    )
    assert r.code == 0, r.err
    original = show_json(project)
    epoch = original["determinism"]["source_date_epoch"]
    assert isinstance(epoch, int) and epoch > 1_700_000_000
    outputs = _outputs(original)
    assert {
        "model.pt",
        "run.zip",
        "figures/loss.pdf",
        "figures/report.pdf",
        "figures/predictions.csv.gz",
    } <= set(outputs)

    r = project.repro("replay", "latest")
    assert r.code == 0, r.out + r.err
    assert "IDENTICAL" in r.out
    assert "equal by content: " in r.out
    assert "figures/report.pdf" in r.out and "same content (PDF, creation date ignored)" in r.out
    assert "same content (gzip, header mtime ignored)" in r.out
    assert "same content (zip, member times ignored)" in r.out
    assert "same content (SVG, generated ids ignored)" in r.out  # the date came from SOURCE_DATE_EPOCH

    replay = show_json(project)
    assert replay["kind"] == "replay" and replay["determinism"]["source_date_epoch"] == epoch
    again = _outputs(replay)
    assert again["figures/loss.pdf"] == outputs["figures/loss.pdf"]  # Matplotlib honoured the recorded clock
    assert again["figures/report.pdf"] != outputs["figures/report.pdf"]  # the script's own datetime.now()
    assert again["figures/predictions.csv.gz"] != outputs["figures/predictions.csv.gz"]

    r = project.repro("diff", "latest~1", "latest")
    assert r.code == 0, r.err
    assert "SOURCE_DATE_EPOCH" not in r.out  # a clock is never a cause


def test_a_capsule_replays_with_the_recorded_clock(project: Project) -> None:
    project.script("plot_report.py", "train.py")
    project.commit("train")
    r = project.repro("run", "--backend", "local", "--", "python", "train.py", "--epochs", "5")
    assert r.code == 0, r.err
    epoch = show_json(project)["determinism"]["source_date_epoch"]
    capsule = project.root.parent / "run.tar"
    assert project.repro("export", "latest", "-o", str(capsule)).code == 0

    # The record names the clock; the replay of the file sets it in the run's environment.
    import tarfile

    with tarfile.open(capsule) as tar:
        member = tar.extractfile("capsule.yaml")
        assert member is not None
        assert yaml.safe_load(member.read())["determinism"]["source_date_epoch"] == epoch
    r = project.repro("replay", str(capsule), "--backend", "local")
    assert r.code == 0, r.out + r.err
    assert "IDENTICAL" in r.out


def test_the_runs_of_a_check_share_one_clock(project: Project) -> None:
    project.script("plot_report.py", "train.py")
    project.commit("train")
    r = project.repro("check", "--backend", "local", "--", "python", "train.py", "--epochs", "5")
    assert r.code == 0, r.out + r.err
    first, second = (show_json(project, ref) for ref in ("latest~1", "latest"))
    assert second["determinism"]["source_date_epoch"] == first["determinism"]["source_date_epoch"]
    assert _outputs(second)["figures/loss.pdf"] == _outputs(first)["figures/loss.pdf"]
