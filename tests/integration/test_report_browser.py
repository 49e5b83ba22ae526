"""The CI pictures for real: two runs of an unmodified nanoGPT-style script that differ, `repro check
--plot --html`, and the page opened in headless Chromium: no console error, nothing fetched, and the
screenshot shows both runs' curves and the red line of the first divergence."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# nanoGPT's print shapes; from iteration 20 on, noise no seed controls (os.urandom) moves the loss.
TRAIN = """\
import argparse
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("--max_iters", type=int, default=60)
parser.add_argument("--eval_interval", type=int, default=30)
args = parser.parse_args()
loss = 4.2
for it in range(args.max_iters + 1):
    t0 = time.time()
    if it >= 20:
        loss -= int.from_bytes(os.urandom(2), "little") / 65536 * 0.05
    loss *= 0.97
    if it % args.eval_interval == 0:
        print(f"step {it}: train loss {loss:.4f}, val loss {loss * 1.02:.4f}")
    if it % 5 == 0:
        print(f"iter {it}: loss {loss:.4f}, time {(time.time() - t0) * 1000:.2f}ms, mfu -100.00%")
"""

RGB = {"run-a": (31, 119, 180), "run-b": (255, 127, 14), "mark": (214, 39, 40)}


def _pixels(png: Path) -> Any:
    import matplotlib.image

    image = matplotlib.image.imread(str(png))
    return (image[:, :, :3] * 255).round().astype(int)


def _near(pixels: Any, colour: tuple[int, int, int]) -> Any:
    import numpy as np

    return np.abs(pixels - np.array(colour)).sum(axis=2) < 40


def _tallest_red_column(pixels: Any) -> int:
    return int(_near(pixels, RGB["mark"]).sum(axis=0).max())


def test_check_plot_and_html_report_in_headless_chromium(project: Project, tmp_path: Path) -> None:
    if CHROMIUM is None:
        pytest.skip("no chromium on this machine (Debian: apt-get install chromium)")
    project.write("train.py", TRAIN)
    project.commit("nanogpt-style")
    plot, page = tmp_path / "curves.png", tmp_path / "report.html"
    argv = ["--backend", "local", "--plot", str(plot), "--html", str(page), "--", "python", "train.py"]
    r = project.repro("check", *argv)
    assert r.code == 5, r.err
    assert f"metric curves written to {plot}" in r.err and f"HTML report written to {page}" in r.err

    png = _pixels(plot)
    assert _near(png, RGB["run-a"]).sum() > 200 and _near(png, RGB["run-b"]).sum() > 200
    assert _tallest_red_column(png) > 150  # the divergence line spans a panel's height

    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
         "--window-size=1400,1000", f"--screenshot={shot}", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert shot.is_file(), done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []  # no script error, no resource that failed to load
    pixels = _pixels(shot)
    assert _near(pixels, RGB["run-a"]).sum() > 200, "run A's curve is not on the screenshot"
    assert _near(pixels, RGB["run-b"]).sum() > 200, "run B's curve is not on the screenshot"
    assert _tallest_red_column(pixels) > 150, "the first divergence is not marked on the screenshot"
    text = page.read_text()
    assert text.count("<svg") == 3  # loss, train_loss, val_loss: one panel each
    assert "first divergence: step 20" in text and ">diverged<" in text
    assert "loss at step 20" in text  # the verdict names the earliest divergence


def test_the_browser_check_fails_on_a_page_with_a_console_error(tmp_path: Path) -> None:
    """The console check above can fail: a page with a script error is caught."""
    if CHROMIUM is None:
        pytest.skip("no chromium on this machine (Debian: apt-get install chromium)")
    page = tmp_path / "bad.html"
    page.write_text('<html><body><script>undefinedFunction();</script><img src="missing.png"></body></html>')
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
         f"--screenshot={tmp_path / 'shot.png'}", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
