"""`repro diff` of two real runs of an unseeded regression script (pytorch/examples regression): no output
file, only the printed loss differs. The results differ, and no form of the diff calls them identical."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.slow


def test_two_unseeded_regressions_are_not_called_identical(project: Project, tmp_path: Path) -> None:
    project.script("regression_unseeded.py", "main.py")
    project.commit("regression")
    for _ in range(2):  # no --seed: each run draws its own, as a user's two runs would
        r = project.repro("run", "--backend", "local", "--", "python", "main.py")
        assert r.code == 0, r.err
    page = tmp_path / "diff.html"
    text = project.repro("diff", "latest~1", "latest", "--html", str(page))
    assert text.code == 0, text.err
    assert "results identical" not in text.out and "changed without effect" not in text.out
    assert "results differ:" in text.out and "Loss" in text.out, text.out
    data = json.loads(project.repro("diff", "latest~1", "latest", "--json").out)
    assert data["results_differ"] is True and data["without_effect"] == []
    assert [r["code"] for r in data["results"]][:1] == ["log_differs"]
    assert any(c["category"] == "seed" for c in data["likely_causes"]), data["likely_causes"]
    markdown = project.repro("diff", "latest~1", "latest", "--markdown").out
    assert "Results identical" not in markdown
    assert 'id="verdict">differs<' in page.read_text()
