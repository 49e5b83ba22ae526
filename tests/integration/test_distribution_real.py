"""repro as its users get it: the wheel built from this checkout, installed by its distribution name
(``repro-capsule``) into a fresh virtualenv, runs and replays the quick-start; the CI recipes run as
written, step by step, on a clean clone of a project (`recipe_runner`: no CI service is reachable
from here, nor a runner image for `act`).

Packages come from this machine's pip configuration (the index, its find-links) and the built wheel;
nothing else is fetched. The GitHub job makes a base image with debootstrap from the Debian mirror,
under a tag of its own, and removes the images it made.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import git
from tests.integration import recipe_runner

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "recipes" / "quickstart"
RECIPES = REPO / "recipes" / "ci"
DIST_NAME = "repro-capsule"


def _run(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this checkout's files (tracked and new), offline, without build isolation."""
    base = tmp_path_factory.mktemp("dist")
    src = base / "src"
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        source, target = REPO / rel, src / rel
        if source.is_symlink() or source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target, follow_symlinks=False)
    out = base / "wheels"
    built = _run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out)],
        src,
        dict(os.environ),
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = out.glob("*.whl")
    assert wheel.name.startswith("repro_capsule-"), wheel.name
    return out


@pytest.fixture(scope="module")
def runner_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv's bin/ (no system site-packages): the CI runner's Python, a user's venv."""
    venv = tmp_path_factory.mktemp("runner") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    return venv / "bin"


def _pip_config(key: str) -> str | None:
    got = _run([sys.executable, "-m", "pip", "config", "get", key], REPO, dict(os.environ), timeout=60)
    value = " ".join(got.stdout.split()) if got.returncode == 0 else ""
    return value or None


def _user_env(dist: Path, home: Path) -> dict[str, str]:
    """This machine's environment as a user's shell has it: no trace of this test run's virtualenv or of
    repro's own settings; pip finds the built wheel beside its usual find-links; a home of its own."""
    dev_bin = str(Path(sys.prefix) / "bin")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("REPRO_", "PYTEST", "VIRTUAL_ENV", "PYTHON"))
    }
    env["PATH"] = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != dev_bin)
    links = os.environ.get("PIP_FIND_LINKS") or _pip_config("global.find-links") or ""
    env["PIP_FIND_LINKS"] = f"{links} {dist}".strip()
    user_config = Path.home() / ".config" / "pip" / "pip.conf"
    if user_config.is_file():  # the new home has none
        env["PIP_CONFIG_FILE"] = str(user_config)
    env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    for name, value in (("GIT_AUTHOR_NAME", "ci"), ("GIT_AUTHOR_EMAIL", "ci@example.invalid")):
        env[name] = env[name.replace("AUTHOR", "COMMITTER")] = value
    home.mkdir(parents=True, exist_ok=True)
    env["HOME"] = str(home)
    env["NO_COLOR"] = "1"
    return env


def _project(dest: Path, golden: Path | None = None) -> Path:
    """A training project in a git repository: the quick-start's files, the CI recipes where they go."""
    shutil.copytree(QUICKSTART, dest, ignore=shutil.ignore_patterns("outputs", ".repro"))
    (dest / ".github" / "workflows").mkdir(parents=True)
    shutil.copy(RECIPES / "github-actions.yml", dest / ".github" / "workflows" / "reproducibility.yml")
    shutil.copy(RECIPES / "gitlab-ci.yml", dest / ".gitlab-ci.yml")
    (dest / ".gitignore").write_text(".repro/\n")
    if golden is not None:
        (dest / "golden").mkdir()
        shutil.copy(golden, dest / "golden" / "capsule.tar")
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-qm", "training project")
    return dest


def _clone(src: Path, dest: Path) -> Path:
    git(src.parent, "clone", "-q", str(src), str(dest))
    return dest


# --------------------------------------------------------------------------- pip install repro-capsule


def test_the_wheel_installs_by_its_name_and_replays_the_quickstart(
    dist: Path, runner_bin: Path, tmp_path: Path
) -> None:
    env = _user_env(dist, tmp_path / "home")
    env["PATH"] = f"{runner_bin}{os.pathsep}{env['PATH']}"
    python = str(runner_bin / "python")
    project = _project(tmp_path / "quickstart")

    installed = _run([python, "-m", "pip", "install", DIST_NAME], project, env)  # the README's line
    assert installed.returncode == 0, installed.stdout + installed.stderr
    shown = _run([python, "-m", "pip", "show", DIST_NAME], project, env)
    assert f"Name: {DIST_NAME}" in shown.stdout
    assert _run([python, "-m", "pip", "show", "repro"], project, env).returncode != 0  # not the other project
    probe = (
        "import importlib.metadata as m, repro; "
        "print(m.version('repro-capsule'), repro.__version__, repro.__file__)"
    )
    version, own, where = _run([python, "-c", probe], project, env).stdout.split()
    assert version == own and where.startswith(str(runner_bin.parent))  # from the wheel, not this checkout
    assert shutil.which("repro", path=env["PATH"]) == str(runner_bin / "repro")

    deps = _run(
        [python, "-m", "pip", "install", "--require-hashes", "-r", "lockfiles/requirements.lock.txt"],
        project,
        env,
    )
    assert deps.returncode == 0, deps.stdout + deps.stderr
    run = _run(
        ["repro", "run", "--backend", "local", "--seed", "42", "--", "python", "train.py", "--lr", "0.05"],
        project,
        env,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    replay = _run(["repro", "replay", "latest"], project, env)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert (
        "IDENTICAL" in replay.stdout and "outputs/model.pt" not in replay.stdout
    )  # same bytes: nothing listed


# --------------------------------------------------------------------------- the CI recipes


@pytest.fixture
def made_images() -> Iterator[list[str]]:
    """Image names a test makes in the shared engine; removed afterwards (only those)."""
    names: list[str] = []
    yield names
    for name in reversed(names):
        subprocess.run(["docker", "rmi", "-f", name], capture_output=True, timeout=300)


def _local_indexes() -> dict[str, str | None]:
    """The recipes name torch's CPU index, which this machine does not reach: its own pip config instead."""
    return {"PIP_EXTRA_INDEX_URL": _pip_config("global.extra-index-url")}


def _env_image(capsule: Path, env: dict[str, str], cwd: Path) -> str:
    shown = _run(["repro", "show", str(capsule), "--json"], cwd, env)
    assert shown.returncode == 0, shown.stderr
    image = json.loads(shown.stdout)["deps"]["image"]
    assert image and image["tag"].startswith("repro-env:"), image
    return str(image["tag"])


@pytest.mark.docker
@pytest.mark.timeout(3600)
def test_the_github_recipe_runs_as_written_then_loads_its_cache_and_checks_a_golden_capsule(
    dist: Path, runner_bin: Path, tmp_path: Path, made_images: list[str]
) -> None:
    workflow = yaml.safe_load((RECIPES / "github-actions.yml").read_text())
    cache = tmp_path / "actions-cache"
    cache.mkdir()
    base = f"repro-base:recipe-{secrets.token_hex(4)}"  # never the engine's shared base image
    made_images.append(base)
    overrides = {**_local_indexes(), "REPRO_BASE_IMAGE": base}

    # A first job on a fresh runner: nothing cached, no base image.
    src = _project(tmp_path / "src")
    env = _user_env(dist, tmp_path / "home1")
    if shutil.which("sudo", path=env["PATH"]) is None:  # root here: sudo as the runner's passwordless one
        shim = tmp_path / "shim"
        shim.mkdir()
        (shim / "sudo").write_text('#!/bin/sh\nexec "$@"\n')
        (shim / "sudo").chmod(0o755)
        env["PATH"] = f"{env['PATH']}{os.pathsep}{shim}"
    first = recipe_runner.run_github_job(
        workflow,
        "repro-check",
        _clone(src, tmp_path / "clone1"),
        tmp_path / "home1",
        runner_bin,
        cache,
        env,
        overrides,
    )
    assert first.ok, first.log()
    ran = {s.name: s for s in first.steps}
    assert f"{base} made in" in ran["Load the cached images, or make the base image"].output
    assert not ran["The golden capsule still reproduces with this code"].ran  # none committed yet
    assert ran["Keep the images this job used for the cache"].ran
    reports = tmp_path / "home1" / "runner-temp" / "repro"
    assert first.uploaded == [reports]
    capsule = reports / "capsule.tar"
    made_images.insert(0, _env_image(capsule, first.env, first.clone))
    assert ET.parse(reports / "check.xml").getroot().get("failures") == "0"
    assert "IDENTICAL" in (tmp_path / "home1" / "step_summary.md").read_text().upper()
    (entry,) = cache.iterdir()
    assert (entry / "1" / "images.tar").is_file() and any((entry / "0").iterdir())  # images, wheelhouse

    # A later job on another fresh runner, after the capsule was committed as the golden one.
    for name in made_images:  # that runner's engine has none of the images
        subprocess.run(["docker", "rmi", "-f", name], capture_output=True, check=True, timeout=300)
    src2 = _project(tmp_path / "src2", golden=capsule)
    env2 = {**env, "HOME": str(tmp_path / "home2")}
    second = recipe_runner.run_github_job(
        workflow,
        "repro-check",
        _clone(src2, tmp_path / "clone2"),
        tmp_path / "home2",
        runner_bin,
        cache,
        env2,
        overrides,
    )
    assert second.ok, second.log()
    ran = {s.name: s for s in second.steps}
    loaded = ran["Load the cached images, or make the base image"].output
    assert "Loaded image" in loaded and "made in" not in loaded  # no debootstrap, no build
    assert "reusing image" in ran["Training reproduces (two runs, one seed, strict mode)"].output
    golden_step = ran["The golden capsule still reproduces with this code"]
    assert golden_step.ran
    # the pull request's capsule replays in the docker sandbox, never on the runner's host
    said = golden_step.output
    assert "backend docker" in said and "unsandboxed" not in said, said
    assert not ran["Keep the images this job used for the cache"].ran  # an exact cache hit
    golden = tmp_path / "home2" / "runner-temp" / "repro" / "golden.xml"
    assert ET.parse(golden).getroot().get("failures") == "0"


def test_the_gitlab_recipe_runs_as_written_with_a_golden_capsule(
    dist: Path, runner_bin: Path, tmp_path: Path
) -> None:
    config = yaml.safe_load((RECIPES / "gitlab-ci.yml").read_text())
    env = _user_env(dist, tmp_path / "home")
    env["PATH"] = f"{runner_bin}{os.pathsep}{env['PATH']}"  # the job image's python
    overrides = _local_indexes()

    # The golden capsule, made once from a run the team trusts, and committed.
    maker = _project(tmp_path / "maker")
    python = str(runner_bin / "python")
    for argv in (
        [python, "-m", "pip", "install", DIST_NAME],
        [python, "-m", "pip", "install", "--require-hashes", "-r", "lockfiles/requirements.lock.txt"],
        ["repro", "run", "--backend", "local", "--seed", "0", "--", "python", "train.py", "--epochs", "1"],
        ["repro", "export", "latest", "-o", str(tmp_path / "golden.tar")],
    ):
        done = _run(argv, maker, env)
        assert done.returncode == 0, done.stdout + done.stderr
    src = _project(tmp_path / "src", golden=tmp_path / "golden.tar")

    job = recipe_runner.run_gitlab_job(config, "repro-check", _clone(src, tmp_path / "clone"), env, overrides)
    assert job.ok, job.log()
    reports = job.clone / "repro-reports"
    for name in ("check.xml", "golden.xml"):
        root = ET.parse(reports / name).getroot()
        assert root.get("failures") == "0" and int(root.get("tests") or 0) > 0, name
    assert (reports / "capsule.tar").is_file()
    status = _run(["git", "status", "--porcelain"], job.clone, env).stdout
    assert "lockfiles/" not in status  # the committed lock was reused, not compiled again
    record = json.loads(_run(["repro", "show", "latest", "--json"], job.clone, env).stdout)
    code = [f["path"] for f in record["code"]["files"]]
    assert not [p for p in code if p.startswith(".cache/")]  # the job's pip cache is never code
