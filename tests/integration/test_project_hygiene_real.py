"""What repro leaves in a project and says about it, as a user meets it: a capsule exported into the
project, an output directory the run never used, a warning raised inside ``torch.load``, a seed a
library sets while it is imported. Real runs on the local backend, each in its own process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.builders import show_json
from tests.conftest import Project

pytestmark = pytest.mark.slow

TRAIN = '''\
"""Fit a line; save the model in the working directory, then read it back to evaluate."""
import argparse

import torch
from torch import nn

import augment
import helpers


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    x = torch.linspace(-1, 1, 32).unsqueeze(1)
    y = 2 * x + torch.tensor(augment.noise(32), dtype=torch.float32).unsqueeze(1)
    model = nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(args.epochs):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"epoch {epoch} loss {loss.item():.6f} jitter {helpers.JITTER:.6f}")
    torch.save(model.state_dict(), "model.pt")
    state = torch.load("model.pt")
    model.load_state_dict(state)


if __name__ == "__main__":
    main()
'''

# A library outside the project (as if installed): it seeds its own generator when imported.
LIBRARY = '''\
"""Noise for augmentation, from a generator of its own."""
import numpy as np

_RNG = np.random.default_rng(1234)


def noise(n):
    return _RNG.normal(0.0, 0.05, size=n)
'''

# A module of the project: its import-time seed is the project's own.
HELPERS = """\
import numpy as np

JITTER = float(np.random.default_rng(5).uniform())
"""


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.fixture
def lib(tmp_path: Path) -> dict[str, str]:
    """PYTHONPATH with the library; the run inherits it as an installed package's path."""
    site = tmp_path / "site" / "augment"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text(LIBRARY)
    return {"PYTHONPATH": str(site.parent)}


@pytest.fixture
def trained(project: Project, lib: dict[str, str]) -> Project:
    project.write("train.py", TRAIN)
    project.write("helpers.py", HELPERS)
    project.write(".gitignore", ".repro/\n")  # no outputs/ rule: an empty one would show as new
    project.commit("train")
    return project


def test_an_unused_output_directory_is_not_left_behind(trained: Project, lib: dict[str, str]) -> None:
    r = trained.repro("run", "--backend", "local", "--", "python", "train.py", env=lib)
    assert r.code == 0, r.err
    assert not (trained.root / "outputs").exists()  # declared by default, never written
    assert [o["path"] for o in show_json(trained)["results"]["outputs"]] == ["model.pt"]

    trained.write("repro.yaml", "outputs: [outputs]\n")
    trained.write("save.py", "from pathlib import Path\nPath('outputs/a.txt').write_text('x')\n")
    trained.commit("writes outputs")
    r = trained.repro("run", "--backend", "local", "--", "python", "save.py", env=lib)
    assert r.code == 0, r.err
    assert (trained.root / "outputs" / "a.txt").read_text() == "x"  # a used one stays, with its file


def test_a_torch_load_warning_names_the_scripts_line(trained: Project, lib: dict[str, str]) -> None:
    env = {**lib, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}  # torch.load then warns for its caller
    r = trained.repro("run", "--backend", "local", "--", "python", "train.py", env=env)
    assert r.code == 0, r.err
    line = _line(TRAIN, 'torch.load("model.pt")')
    shown = [x for x in (r.out + r.err).splitlines() if "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD detected" in x]
    assert shown and all(f"train.py:{line}: UserWarning" in x for x in shown), shown
    assert "repro/runtime" not in r.out + r.err


def test_a_seed_set_while_a_library_is_imported_is_the_librarys(
    trained: Project, lib: dict[str, str]
) -> None:
    r = trained.repro("run", "--backend", "local", "--", "python", "train.py", env=lib)
    assert r.code == 0, r.err
    seeds = show_json(trained)["seeds"]["script_seeds"]
    library_line = _line(LIBRARY, "default_rng(1234)")
    helpers_line = _line(HELPERS, "default_rng(5)")
    assert {
        "api": "numpy.random.default_rng",
        "value": 1234,
        "where": f"augment/__init__.py:{library_line}",
    } in seeds
    assert {"api": "numpy.random.default_rng", "value": 5, "where": f"helpers.py:{helpers_line}"} in seeds
    assert all(not s["where"].startswith("train.py:") for s in seeds)  # never the script's import lines


def test_a_capsule_exported_into_the_project_is_neither_code_nor_a_change(
    trained: Project, lib: dict[str, str]
) -> None:
    r = trained.repro("run", "--backend", "local", "--", "python", "train.py", env=lib)
    assert r.code == 0, r.err
    first = show_json(trained)
    assert first["code"]["dirty"] is False
    os.makedirs(trained.root / "golden")
    for where in ("run.tar", "golden/capsule.tar"):  # the README's and the CI recipe's places
        assert trained.repro("export", "latest", "-o", where).code == 0
    (trained.root / "notes.tar").write_bytes(b"\0" * 1024)  # a tar of the user's: listed like any file

    r = trained.repro("run", "--backend", "local", "--", "python", "train.py", env=lib)
    assert r.code == 0, r.err
    code = show_json(trained)["code"]
    assert code["dirty"] is False  # notes.tar, the user's own untracked file: listed, not code
    paths = {f["path"] for f in code["listed"]}
    assert "notes.tar" in paths and not {"run.tar", "golden/capsule.tar"} & paths
    new = [u["path"] for u in code["listed"] if u["path"] not in code["earlier_outputs"]]
    assert new == ["notes.tar"]  # model.pt is the earlier run's output

    (trained.root / "notes.tar").unlink()
    r = trained.repro("run", "--backend", "local", "--", "python", "train.py", env=lib)
    assert r.code == 0, r.err
    assert show_json(trained)["code"]["dirty"] is False  # the exported capsules alone change nothing
    r = trained.repro("replay", "latest", env=lib)
    assert r.code == 0 and "IDENTICAL" in r.out, r.out + r.err
