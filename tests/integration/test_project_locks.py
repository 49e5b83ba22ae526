"""A project's own lockfile is the lock: uv.lock, poetry.lock and pylock.toml made by the real tools
are read as they are (the pins they hold, the groups their tool installs), a stale one is an error
naming the command that refreshes it, and a package from git or a path is refused with its reason."""

from __future__ import annotations

import importlib.util
import json
import shutil
import tarfile
import tomllib
from pathlib import Path

import pytest

from repro.facts.lockfile import pins
from repro.facts.projectlock import pylock
from tests import projectlocks as tools
from tests.conftest import Project

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three projects, each locked once by its tool (Poetry takes some 20 s)."""
    return tools.make_projects(tmp_path_factory.mktemp("locked"))


def _project(made: dict[str, Path], kind: str, tmp_path: Path) -> Project:
    project = Project.init(tmp_path / kind)
    shutil.copytree(made[kind], project.root, dirs_exist_ok=True)
    project.write(".gitignore", "outputs/\n.repro/\n")
    project.commit("locked")
    return project


def _lock(project: Project, *args: str) -> dict[str, object]:
    r = project.repro("lock", "--json", *args)
    assert r.code == 0, r.err
    answer: dict[str, object] = json.loads(r.out)
    return answer


def _uv_versions(root: Path) -> dict[str, str]:
    data = tomllib.loads((root / "uv.lock").read_text())
    return {p["name"]: p["version"] for p in data["package"] if "registry" in p["source"]}


def test_uv_lock_pins_what_uv_locked_with_its_default_dev_group(
    made: dict[str, Path], tmp_path: Path
) -> None:
    project = _project(made, "uv", tmp_path)
    answer = _lock(project)
    assert answer["source"] == "uv.lock" and answer["groups"] == ["dev"] and answer["compiled"] is False
    locked = pins(answer["packages"])  # type: ignore[arg-type]
    assert locked == _uv_versions(project.root)  # every package uv locked, at its version
    assert locked["numpy"] == tools.NUMPY and locked["tqdm"] and locked["torch"].startswith("2.13.0")
    text = (project.root / "lockfiles" / "project.lock.txt").read_text()
    assert "# source: uv.lock" in text and "--hash=sha256:" in text
    assert project.repro("lock", "--check").code == 0
    assert not (project.root / "uv.lock").read_text() != (made["uv"] / "uv.lock").read_text()  # untouched


def test_deps_groups_chooses_the_groups_and_names_the_ones_there_are(
    made: dict[str, Path], tmp_path: Path
) -> None:
    project = _project(made, "uv", tmp_path)
    project.write("repro.yaml", "deps:\n  groups: []\n")
    answer = _lock(project)
    assert answer["groups"] == [] and "tqdm" not in pins(answer["packages"])  # type: ignore[arg-type]
    project.write("repro.yaml", "deps:\n  groups: [docs]\n")
    r = project.repro("lock")
    assert r.code == 2 and "deps.groups names docs, which uv.lock does not have" in r.err
    assert "dev" in r.err  # the groups it has


def test_a_stale_uv_lock_is_an_error_naming_uv_lock_never_relocked(
    made: dict[str, Path], tmp_path: Path
) -> None:
    project = _project(made, "uv", tmp_path)
    before = (project.root / "uv.lock").read_text()
    pyproject = project.root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f'"numpy=={tools.NUMPY}"', '"numpy>=2.3"'))
    project.commit("want a newer numpy")
    r = project.repro("run", "--backend", "local", "--", "python", "train.py")
    assert r.code == 2, r.err
    assert "uv.lock is stale" in r.err and "numpy" in r.err and "`uv lock`" in r.err
    assert "Traceback" not in r.err
    assert not (project.root / ".repro" / "runs").is_dir() or not any(
        (project.root / ".repro" / "runs").iterdir()
    )
    assert project.repro("lock").code == 2
    check = project.repro("lock", "--check")
    assert check.code == 1 and "`uv lock`" in check.err
    assert (project.root / "uv.lock").read_text() == before  # repro never re-locks it
    tools.uv_lock(project.root)
    assert project.repro("lock", "--check").code == 0
    assert pins(_lock(project)["packages"])["numpy"] != tools.NUMPY  # type: ignore[arg-type]


def test_a_path_or_git_package_is_refused_with_its_reason(made: dict[str, Path], tmp_path: Path) -> None:
    project = _project(made, "uv", tmp_path)
    lock = project.root / "uv.lock"
    text = lock.read_text()
    start = text.index('name = "tqdm"')
    source = text.index("source = ", start)
    end = text.index("\n", source)
    git = 'source = { git = "https://github.com/tqdm/tqdm?rev=v4.70.1#0123456789abcdef" }'
    lock.write_text(text[:source] + git + text[end:])
    r = project.repro("lock")
    assert r.code == 2 and "tqdm comes from a git URL" in r.err and "hash-pinned release" in r.err

    meta = '[project]\nname = "helper"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n'
    helper = project.write("libs/helper/pyproject.toml", meta)
    project.write("libs/helper/helper/__init__.py", "")
    lock.write_text(text)
    tools._run([tools.tool("uv"), "add", "--no-sync", str(helper.parent)], project.root, tools.uv_env())
    r = project.repro("lock")
    assert r.code == 2 and "helper comes from a local directory" in r.err and "vendor" in r.err


def test_poetry_lock_is_read_with_poetrys_content_hash(made: dict[str, Path], tmp_path: Path) -> None:
    project = _project(made, "poetry", tmp_path)
    answer = _lock(project)
    assert answer["source"] == "poetry.lock" and answer["groups"] == ["dev"]
    data = tomllib.loads((project.root / "poetry.lock").read_text())
    wanted = {
        p["name"]: p["version"] for p in data["package"] if p.get("markers") != 'platform_system == "Windows"'
    }
    assert pins(answer["packages"]) == wanted  # type: ignore[arg-type]
    assert "colorama" not in pins(answer["packages"])  # type: ignore[arg-type]  # Windows only
    pyproject = project.root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f"numpy=={tools.NUMPY}", "numpy>=2.3"))
    r = project.repro("lock")
    assert r.code == 2 and "poetry.lock is stale" in r.err and "`poetry lock`" in r.err


def test_pylock_from_pip_lock_is_read_and_checked_against_the_requirements(
    made: dict[str, Path], tmp_path: Path
) -> None:
    project = _project(made, "pip", tmp_path)
    answer = _lock(project)
    assert answer["source"] == "pylock.toml"
    data = tomllib.loads((project.root / "pylock.toml").read_text())
    assert pins(answer["packages"]) == {p["name"]: p["version"] for p in data["packages"]}  # type: ignore[arg-type]
    project.write("requirements.txt", f"{tools.TORCH}\nnumpy>=2.3\ntqdm\n")
    r = project.repro("lock")
    assert r.code == 2 and "pylock.toml is stale" in r.err and "numpy>=2.3" in r.err and "pip lock" in r.err


def test_lock_format_pylock_writes_a_pep751_file_that_reads_back_the_same(
    made: dict[str, Path], tmp_path: Path
) -> None:
    project = _project(made, "uv", tmp_path)
    answer = _lock(project, "--format", "pylock")
    assert answer["pylock"] == "lockfiles/pylock.toml"
    written = tomllib.loads((project.root / "lockfiles" / "pylock.toml").read_text())
    assert written["lock-version"] == "1.0"
    back = pylock.read("pylock.toml", written, {}, None, project.root)
    assert {e.name: e.version for e in back.entries} == pins(answer["packages"])  # type: ignore[arg-type]
    for pkg in written["packages"]:  # every file named by its place and digest
        for f in [*pkg.get("wheels", []), *([pkg["sdist"]] if "sdist" in pkg else [])]:
            assert f["url"] and len(f["hashes"]["sha256"]) == 64
    if importlib.util.find_spec("packaging.pylock") is not None:  # packaging ≥ 25.1 validates PEP 751
        from packaging.pylock import Pylock

        Pylock.from_dict(written).validate()


def test_the_record_show_and_export_name_the_project_lock(made: dict[str, Path], tmp_path: Path) -> None:
    project = _project(made, "uv", tmp_path)
    r = project.repro("run", "--backend", "local", "--", "python", "train.py", "--steps", "3")
    assert r.code == 0, r.err
    assert "lock: uv.lock is the lock" in r.err and "never re-resolved" in r.err
    record = json.loads(project.repro("show", "latest", "--json").out)
    assert record["deps"]["project_lock"] == "uv.lock" and record["deps"]["groups"] == ["dev"]
    assert "read from the project's uv.lock" in project.repro("show", "latest").out
    tar = tmp_path / "run.tar"
    exported = project.repro("export", "latest", "-o", str(tar))
    assert exported.code == 0 and "its lock as pylock.toml" in exported.out
    with tarfile.open(tar) as t:
        member = t.extractfile("pylock.toml")
        assert member is not None
        carried = tomllib.loads(member.read().decode())
    assert {p["name"]: p["version"] for p in carried["packages"]} == pins(record["deps"]["requirements"])
    assert project.repro("verify", str(tar)).code == 0
