"""scripts/gpu-check on a machine without a GPU: the list of checks matches the README's tags, the
no-GPU path is one line and exit 0, and the report writer and bootstrap interval do what they say."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scripts.gpucheck import measure
from scripts.gpucheck.checks import CHECKS, TOTAL_BUDGET_S
from scripts.gpucheck.harness import SCRIPTS, Deadline, Lab, OverBudget, runtime_pins
from scripts.gpucheck.main import NOTHING, budget_for
from scripts.gpucheck.report import Result, bootstrap_ci, render_markdown, write

REPO = Path(__file__).resolve().parents[2]
GPU_CHECK = REPO / "scripts" / "gpu-check"
TAG = re.compile(r"\[gpu-check: ([a-z0-9-]+)\]")


def _gpu_check(*args: str, **env_vars: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # it must find its own way in
    env.update(env_vars)
    # -S: no site-packages, so none of repro's dependencies (a GPU machine has none before its wheels)
    argv = [sys.executable, "-S", str(GPU_CHECK), *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=120)


def test_dry_run_lists_exactly_the_claims_the_readme_tags() -> None:
    r = _gpu_check("--dry-run")  # no repro dependency needed: it runs before anything is installed

    assert r.returncode == 0, r.stderr
    listed = [line.split()[0] for line in r.stdout.splitlines()]
    tagged = TAG.findall((REPO / "README.md").read_text())
    assert len(listed) == len(set(listed)) == len(CHECKS)
    assert sorted(set(tagged)) == sorted(listed), "README tags and `scripts/gpu-check --dry-run` differ"


def test_the_checks_fit_the_total_budget() -> None:
    assert sum(c.budget_s for c in CHECKS) <= TOTAL_BUDGET_S <= 8 * 60


def test_without_a_gpu_it_says_so_in_one_line_and_exits_0(tmp_path: Path) -> None:
    empty = tmp_path / "bin"  # a PATH with no nvidia-smi, whatever this machine has
    empty.mkdir()
    out = tmp_path / "report"

    r = _gpu_check(PATH=str(empty), GPU_CHECK_OUT=str(out))

    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [NOTHING]
    assert r.stderr == ""
    assert not out.exists()  # nothing to report, nothing written


def test_bootstrap_interval_of_synthetic_numbers() -> None:
    assert bootstrap_ci([1.25] * 7) == (1.25, 1.25)
    values = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 2.0]
    lo, hi = bootstrap_ci(values)
    assert min(values) <= lo < statistics.median(values) < hi <= max(values)
    assert bootstrap_ci(values) == (lo, hi), "seeded: the same numbers give the same interval"
    wide = bootstrap_ci(values, level=0.99)
    assert wide[0] <= lo and wide[1] >= hi
    many = bootstrap_ci(values * 10)  # more of the same spread: a narrower interval
    assert many[1] - many[0] < hi - lo
    assert bootstrap_ci([2.0, 4.0], stat=statistics.mean) == (2.0, 4.0)
    with pytest.raises(ValueError):
        bootstrap_ci([])
    with pytest.raises(ValueError):
        bootstrap_ci([1.0], level=1.0)


def test_report_writer_writes_markdown_and_json(tmp_path: Path) -> None:
    machine = {"device": "NVIDIA H100 80GB HBM3", "gpu_count": 1, "driver": "580.159.04", "cuda": "13.0",
               "torch": "2.11.0+cu130", "python": "3.12.3", "repro": "0.1.0 (abc1234)"}  # fmt: skip
    results = [
        Result(
            "ledger",
            "the ledger",
            "pass",
            "default: exit 4, op named",
            ["repro run --json -- python a|b.py"],
            12.3,
            {"ledger": [{"op": "x", "count": 3}]},
        ),  # fmt: skip
        Result("nccl-2gpu", "NCCL", "skip", "needs 2 GPUs, this machine has 1"),
        Result(
            "price-gpt", "price", "finding", "gpu/off ×1.080 [1.020, 1.150]", ["repro run", "repro run"], 80.0
        ),
        Result("ops-cuda", "ops", "fail", "replay identical named no op"),
    ]

    write(tmp_path / "out", machine, results, 140.0)

    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert doc["format"] == "repro.gpu-check/v1"
    assert doc["machine"]["driver"] == "580.159.04"
    assert doc["summary"] == {"pass": 1, "fail": 1, "skip": 1, "finding": 1}
    assert [c["name"] for c in doc["checks"]] == ["ledger", "nccl-2gpu", "price-gpt", "ops-cuda"]
    assert doc["checks"][0]["details"]["ledger"][0]["count"] == 3
    md = (tmp_path / "out" / "REPORT.md").read_text()
    assert md == render_markdown(machine, results, 140.0)
    assert "NVIDIA H100 80GB HBM3 × 1" in md and "580.159.04" in md and "2.11.0+cu130" in md
    rows = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith("| check")]
    assert len(rows) == 1 + len(results)  # the separator row, then one per check
    assert (
        "| ledger | pass | default: exit 4, op named | `repro run --json -- python a\\|b.py` | 12 s |" in md
    )
    assert "4 checks in 140 s: 1 pass, 1 fail, 1 skip, 1 finding" in md


def test_the_checks_scripts_and_wheels_exist() -> None:
    for name in ("gpu_cnn.py", "gpu_gpt.py", "gpu_scatter.py", "gpu_nondet.py"):
        assert (SCRIPTS / name).is_file()
    text = (SCRIPTS / "gpu_gpt.py").read_text()
    assert sum("# forced diff" in line for line in text.splitlines()) == 1  # ops-cuda finds its line
    pins = runtime_pins()
    assert any(p.startswith("click==") for p in pins)
    assert not any(p.split("==")[0] in ("pip", "setuptools") for p in pins)


def test_a_check_gets_its_budget_plus_what_earlier_checks_left_never_the_later_ones_share() -> None:
    assert budget_for(40, left=400, reserved=360) == 40  # on schedule: its own
    assert budget_for(40, left=400, reserved=300) == 100  # 60 s left unspent before it
    assert budget_for(40, left=400, reserved=390) == 40  # behind schedule: still its own
    assert budget_for(40, left=30, reserved=0) == 30  # never past the total
    assert budget_for(40, left=-3, reserved=0) == 0


def test_a_gpu_that_torch_cannot_use_fails_every_check_in_the_report(tmp_path: Path) -> None:
    # nvidia-smi lists a GPU, but this Python's torch has no CUDA (as here): one line, exit 1, a report.
    fake = tmp_path / "bin"
    fake.mkdir()
    smi = fake / "nvidia-smi"
    smi.write_text('#!/bin/sh\ncase "$1" in -L) echo "GPU 0: Fake (UUID: GPU-0)";; *) echo 999.1;; esac\n')
    smi.chmod(0o755)
    out = tmp_path / "report"

    r = _gpu_check("--only", "ledger", PATH=f"{fake}{os.pathsep}{os.environ['PATH']}", GPU_CHECK_OUT=str(out))

    assert r.returncode == 1, r.stderr
    assert r.stdout == ""
    assert "sees no CUDA" in r.stderr.splitlines()[-1]
    doc = json.loads((out / "report.json").read_text())
    assert doc["machine"]["gpu_count"] == 1 and doc["machine"]["driver"] == "999.1"
    assert [(c["name"], c["status"]) for c in doc["checks"]] == [("ledger", "fail")]
    assert doc["checks"][0]["figure"].startswith("not run: 1 GPU(s) listed")
    assert "| ledger | fail | not run:" in (out / "REPORT.md").read_text()


def test_paired_runs_rotate_their_order_and_keep_whole_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def timed(
        lab: Lab, root: Path, mode: str, flags: list[str], extra: list[str], d: Deadline
    ) -> dict[str, Any]:
        calls.append(mode + "".join(extra))
        if len(calls) == 7:  # the third round runs out of time
            raise OverBudget("past the budget")
        return {"s_per_step": {"off": 1.0, "gpu": 1.1, "gpu--no-fill": 1.05}[calls[-1]], "ckpt": "same"}

    monkeypatch.setattr(measure, "_timed", timed)
    variants: dict[str, measure.Variant] = {
        "off": ("off", [], []),
        "gpu": ("gpu", [], []),
        "nofill": ("gpu", [], ["--no-fill"]),
    }

    rounds = measure.paired(Lab(tmp_path), "price", variants, Deadline(600))

    assert calls[:6] == ["off", "gpu", "gpu--no-fill", "gpu", "gpu--no-fill", "off"]
    assert len(rounds) == 2 and [r["off"]["position"] for r in rounds] == [0, 2]
    figure, stats = measure.ratio_figure(rounds, "gpu", "off")
    assert figure == "×1.100 [1.100, 1.100]" and stats["ratios"] == pytest.approx([1.1, 1.1])
