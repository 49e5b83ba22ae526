"""The `repro_check` fixture, used by a small example project's own test suite."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

SEEDED = """\
import random
from pathlib import Path

Path("outputs").mkdir(exist_ok=True)
Path("outputs/weights.txt").write_text(repr([random.random() for _ in range(4)]))
print("loss", random.random())
"""

ENTROPY = """\
import os
from pathlib import Path

Path("outputs").mkdir(exist_ok=True)
Path("outputs/noise.bin").write_bytes(os.urandom(16))
"""

TESTS = """\
from pathlib import Path

PROJECT = Path(__file__).parent / "proj"


def test_seeded_training_reproduces(repro_check):
    result = repro_check("python seeded.py", cwd=PROJECT)
    assert result.status == "identical"


def test_entropy_is_caught(repro_check):
    repro_check("python entropy.py", cwd=PROJECT, runs=3)
"""


def test_the_fixture_passes_a_reproducible_command_and_fails_one_that_is_not(
    pytester: pytest.Pytester,
) -> None:
    proj = pytester.mkdir("proj")
    (proj / "seeded.py").write_text(SEEDED)
    (proj / "entropy.py").write_text(ENTROPY)
    pytester.makepyfile(test_training=TESTS)

    result = pytester.runpytest_subprocess("--repro-backend", "local", "-p", "no:cacheprovider")

    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_entropy_is_caught*",
            "*not reproduced: 3 runs with seed * differ*",
            "*outputs that differ: outputs/noise.bin*",
            "*DIVERGED*",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_the_fixture_checks_against_a_golden_capsule(pytester: pytest.Pytester) -> None:
    proj = pytester.mkdir("proj")
    (proj / "seeded.py").write_text(SEEDED)
    pytester.makepyfile(
        test_golden="""
        import subprocess, sys
        from pathlib import Path

        PROJECT = Path(__file__).parent / "proj"


        def test_golden(repro_check):
            repro = [sys.executable, "-m", "repro"]
            run = [*repro, "run", "--backend", "local", "--", "python", "seeded.py"]
            subprocess.run(run, cwd=PROJECT, check=True)
            subprocess.run([*repro, "export", "latest", "-o", "../golden.tar"], cwd=PROJECT, check=True)
            repro_check(against="../golden.tar", cwd=PROJECT, backend="local")
            script = PROJECT / "seeded.py"
            script.write_text(script.read_text().replace("random.random())", "random.random() * 2)"))
            repro_check(against="../golden.tar", cwd=PROJECT, backend="local")
        """
    )

    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")

    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*not reproduced against *golden.tar*", "*What changed since the capsule*"])
    # the first repro_check passed: the failure is the second one, after the code change
    assert "seeded.py" in result.stdout.str()
