"""The image holds exactly the lock: the comparison of what an image's interpreter finds with the lock."""

from __future__ import annotations

import json
import subprocess
import sys

from repro.backends import imagecheck
from repro.backends.imagecheck import Installed

H = "0" * 64
LOCK = f"""\
setuptools==84.2.1 \\
    --hash=sha256:{H}
torch==2.13.0+cpu \\
    --hash=sha256:{H}
pywin32==306 ; sys_platform == "win32" \\
    --hash=sha256:{H}
Typing_Extensions==4.12.2 \\
    --hash=sha256:{H}
"""
LINUX = {"sys_platform": "linux", "python_version": "3.11", "platform_system": "Linux"}


def test_exactly_the_lock_has_no_difference() -> None:
    found = [Installed("setuptools", "84.2.1"), Installed("torch", "2.13.0+cpu"),
             Installed("typing_extensions", "4.12.2")]  # fmt: skip
    assert imagecheck.differences(LOCK, found, LINUX) == []  # pywin32's marker does not hold


def test_each_difference_is_named() -> None:
    found = [
        Installed("setuptools", "66.1.1", "/opt/venv/lib/python3.11/site-packages"),
        Installed("setuptools", "84.2.1", "/opt/venv/lib/python3.11/site-packages"),
        Installed("torch", "2.12.0"),
        Installed("pip", "23.0.1"),
        Installed("tqdm", "4.66.5"),
    ]
    assert imagecheck.differences(LOCK, found, LINUX) == [
        "pip 23.0.1 (the installer) is not in the lock",
        "setuptools installed 2 times (66.1.1, 84.2.1)",
        "torch: locked 2.13.0+cpu, installed 2.12.0",
        "tqdm 4.66.5 is not in the lock",
        "typing-extensions 4.12.2 is locked but not installed",
    ]
    line = imagecheck.message("repro-env:abc", imagecheck.differences(LOCK, found, LINUX))
    assert "\n" not in line and line.startswith("the image repro-env:abc does not hold exactly its lock: pip")


def test_a_locked_installer_is_no_difference() -> None:
    lock = f"pip==24.2 \\\n    --hash=sha256:{H}\n"
    assert imagecheck.differences(lock, [Installed("pip", "24.2")], LINUX) == []


def test_the_probe_reads_this_interpreter() -> None:
    out = subprocess.run([sys.executable, "-I", "-c", imagecheck.PROBE], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    found, env = imagecheck.parse_probe(out)
    assert any(d.key == "packaging" for d in found)
    assert env["python_version"] == f"{sys.version_info.major}.{sys.version_info.minor}"
    assert json.loads(out)["env"]["sys_platform"] == sys.platform
