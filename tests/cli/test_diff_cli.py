"""`repro diff` through the real CLI entry point, against a real store in a temp project."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro.cli import main
from repro.store.record import (
    CodeInfo,
    CommandInfo,
    DataInfo,
    DataInput,
    DepsInfo,
    FileEntry,
    Record,
    ResultInfo,
    SeedInfo,
)
from repro.store.runs import Store
from repro.store.tarwriter import pack

LESLIE = "20250101-120000-aaaa"
DAVE = "20250101-130000-bbbb"

PATCH = """diff --git a/train.py b/train.py
--- a/train.py
+++ b/train.py
@@ -1,2 +1,2 @@
 import torch
-EPOCHS = 3
+EPOCHS = 4
"""


def _record(store: Store, run_id: str, *, lr: float, bs: int, n_files: int, numpy: str, val: float) -> Record:
    metrics = "".join(
        json.dumps({"name": "loss", "value": round(1.0 / (i + 1) + val, 6), "step": i}) + "\n"
        for i in range(5)
    )
    files = [FileEntry(path=f"data/s{i:03d}.csv", size=20, hash=f"{i:032x}") for i in range(n_files)]
    return Record(
        id=run_id,
        created="2025-01-01T12:00:00Z",
        command=CommandInfo(
            argv=["python", "train.py", "--lr", str(lr), "--batch-size", str(bs)],
            params={"lr": lr, "batch_size": bs},
        ),
        code=CodeInfo(kind="git", commit="c" * 40),
        data=DataInfo(
            inputs=[DataInput(path="data", digest=f"digest{n_files}", size=20 * n_files, files=files)]
        ),
        deps=DepsInfo(requirements=[f"numpy=={numpy}", "torch==2.13.0"]),
        seeds=SeedInfo(master=1),
        results=ResultInfo(
            status="succeeded",
            exit_code=0,
            metrics=store.put_bytes(metrics.encode()),
            final_metrics={"val_error": val},
        ),
    )


def _seal(store: Store, record: Record) -> None:
    store.seal(record, store.begin_run(record.id, record.command.argv))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    store = Store(tmp_path)
    store.ensure()
    _seal(store, _record(store, LESLIE, lr=0.1, bs=32, n_files=10, numpy="1.26.0", val=0.303))
    dave = _record(store, DAVE, lr=0.05, bs=64, n_files=13, numpy="1.26.4", val=0.528)
    dave.code.dirty = True
    dave.code.patch = store.put_bytes(PATCH.encode())
    _seal(store, dave)
    return tmp_path


def repro(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_text_names_causes_in_the_first_three_lines(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = repro(capsys, "-C", str(project), "diff", "latest~1", "latest")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith(f"{LESLIE} → {DAVE}:")
    assert lines[1] == "  1. data changed: 3 files added (+60 B) in data/: s010.csv, s011.csv, s012.csv"
    assert lines[2] == "  2. hyper-parameters changed: batch_size 32 → 64, lr 0.1 → 0.05"
    assert "↑ numpy" in out and "1.26.0 → 1.26.4" in out
    assert "\033[" not in out  # piped: no colour
    assert "EPOCHS" not in out  # no code diff without --code


def test_code_flag_adds_the_unified_diff(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = repro(capsys, "-C", str(project), "diff", LESLIE, DAVE, "--code")
    assert code == 0
    assert "+EPOCHS = 4" in out and "-EPOCHS = 3" in out


def test_exit_code_like_git_diff(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert repro(capsys, "-C", str(project), "diff", LESLIE, DAVE, "--exit-code")[0] == 1
    code, out, _ = repro(capsys, "-C", str(project), "diff", LESLIE, LESLIE[:13], "--exit-code")
    assert code == 0
    assert out == f"No recorded differences between {LESLIE} and {LESLIE}.\n"


def test_json_document(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = repro(capsys, "-C", str(project), "diff", LESLIE, DAVE, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["format"] == "repro.diff/v1"
    assert data["likely_causes"][0]["section"] == "data"
    deps = next(s for s in data["sections"] if s["name"] == "dependencies")
    assert deps["changes"][0] == {
        "key": "numpy",
        "kind": "upgraded",
        "scope": "lockfile",
        "old": "1.26.0",
        "new": "1.26.4",
        "delta": None,
        "lines": None,
        "detail": None,
        "tensors": None,
    }


def test_markdown_and_all(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = repro(capsys, "-C", str(project), "diff", LESLIE, DAVE, "--markdown", "--all")
    assert code == 0
    assert out.startswith(f"### repro diff `{LESLIE}` → `{DAVE}`")
    assert "#### Seeds\n\nsame" in out
    assert "| ↑ | `numpy` | 1.26.0 | 1.26.4 |  |" in out


def test_json_and_markdown_on_stdout_are_exclusive(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for markdown in (["--markdown"], ["--markdown", "-"]):
        code, out, err = repro(capsys, "-C", str(project), "diff", LESLIE, DAVE, "--json", *markdown)
        assert code == 2 and out == ""
        assert "--json and --markdown - both print on stdout" in err and "--markdown FILE" in err


def test_markdown_to_a_file_beside_the_text_or_the_json(
    project: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    md = tmp_path / "comment.md"
    code, out, _ = repro(capsys, "-C", str(project), "diff", LESLIE, DAVE, "--markdown", str(md))
    assert code == 0 and out.startswith(LESLIE)  # the text, as without --markdown
    assert md.read_text().startswith(f"### repro diff `{LESLIE}` → `{DAVE}`")
    md.unlink()
    code, out, _ = repro(capsys, "-C", str(project), "diff", LESLIE, DAVE, "--json", "--markdown", str(md))
    assert code == 0 and json.loads(out)["format"] == "repro.diff/v1" and md.is_file()
    code, out, _ = repro(capsys, "-C", str(project), "diff", LESLIE, DAVE, "--markdown", "-")
    assert code == 0 and out.startswith("### repro diff")


def test_unknown_ref_is_a_usage_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = repro(capsys, "-C", str(project), "diff", LESLIE, "nope")
    assert code == 2 and out == ""
    assert "no run matches 'nope'" in err


def test_capsule_file_as_a_ref(project: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    store = Store(project)
    loaded = store.load_run(LESLIE)
    tar = pack(loaded.record, loaded.blob_path, tmp_path / "leslie.tar")
    code, out, _ = repro(capsys, "-C", str(project), "diff", str(tar), DAVE, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["a"]["id"] == LESLIE
    metrics = next(s for s in data["sections"] if s["name"] == "metrics")
    assert metrics["divergence"]["step"] == 0  # the series came from the capsule's own blob


def test_plot_writes_a_png(project: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "plots" / "curves.png"
    code, out, err = repro(capsys, "-C", str(project), "diff", LESLIE, DAVE, "--plot", str(target))
    assert code == 0
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "curves.png" in err and out.startswith(LESLIE)


def test_help_lists_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = repro(capsys, "diff", "--help")
    assert code == 0
    for option in ("--json", "--markdown", "--code", "--plot", "--exit-code", "--all"):
        assert option in out


def test_budget_needs_prove_and_a_proof_needs_run_a_s_data(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = repro(capsys, "-C", str(project), "diff", LESLIE, DAVE, "--budget", "3")
    assert code == 2 and out == "" and "--budget bounds the executions of --prove" in err
    code, out, err = repro(capsys, "-C", str(project), "diff", LESLIE, DAVE, "--steps", "4")
    assert code == 2 and out == "" and "--steps sets the window of --prove's experiments" in err
    code, out, err = repro(capsys, "-C", str(project), "diff", LESLIE, DAVE, "--prove")
    assert code == 5 and out == ""  # nothing executed: every experiment re-executes run A, whose data is gone
    assert f"--prove re-executes run {LESLIE}, and its data data is neither here" in err
    assert "Traceback" not in err
    code, out, err = repro(capsys, "-C", str(project), "check", "--prove", "--", "python", "train.py")
    assert code == 2 and "--prove explains a check against a golden run" in err
