"""The file repro's own output goes to (`repro run … > train.out 2>&1 &`) is neither code nor output.

Real runs in a real git repository, local backend, repro's stdout and stderr sent by the
caller to `train.out` in the project, as a shell redirection does. A Python script (the
runtime watches its writes) and a shell command (no runtime: whatever changed in the project
is the run's) both leave it out of the snapshot, the dirty flag and the outputs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import Project


@pytest.mark.parametrize(
    "command",
    [
        ["python", "train.py"],
        ["bash", "-c", "mkdir -p outputs && echo 0.5 > outputs/model.txt && echo trained"],
    ],
)
def test_the_log_the_shell_writes_is_not_code_or_output(project: Project, command: list[str]) -> None:
    project.write("train.py", "import os\nos.makedirs('outputs', exist_ok=True)\n"
                  "open('outputs/model.txt', 'w').write('0.5')\nprint('trained')\n")  # fmt: skip
    project.commit("train")
    log = project.root / "train.out"
    with open(log, "w") as out:
        done = subprocess.run(
            [sys.executable, "-m", "repro", "run", "--backend", "local", "--", *command],
            cwd=project.root, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
    assert done.returncode == 0, log.read_text()
    assert "\ntrained\n" in log.read_text()
    record = json.loads(project.repro("show", "latest", "--json").out)
    assert "train.out" not in [f["path"] for f in record["code"]["files"]]
    assert record["code"]["dirty"] is False
    assert [o["path"] for o in record["results"]["outputs"]] == ["outputs/model.txt"]
    second = project.repro("run", "--backend", "local", "--", *command)  # its output is not a file here
    assert second.code == 0, second.err
    record = json.loads(project.repro("show", "latest", "--json").out)
    assert "train.out" in [f["path"] for f in record["code"]["listed"]]  # now an ordinary file: listed
    assert "train.out" not in [f["path"] for f in record["code"]["untracked"]] and not record["code"]["dirty"]
