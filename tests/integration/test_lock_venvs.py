"""An image's lock is a function of the requirements, the index configuration and the platform: the
same `requirements.in` locked from two virtual environments that have different versions of a package
installed gives byte-identical `lockfiles/requirements.lock.txt`. The local backend's lock still holds
each requirement at the version installed in the environment that runs it.

Two real environments made with `python -m venv`, each seeing the project's packages through a
`.pth` file; one has an older `idna` installed from a local wheel (unpacked into its site-packages, as
an installer does). Each compiles with its own repro cache, so neither reuses the other's compile."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
OLD = "2.10"  # not the idna this interpreter has


def _wheel(dest: Path) -> Path:
    """A local wheel of idna OLD: metadata only (its import package stays the project's)."""
    whl = dest / f"idna-{OLD}-py3-none-any.whl"
    info = f"idna-{OLD}.dist-info"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: idna\nVersion: {OLD}\n")
        wheel = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        z.writestr(f"{info}/WHEEL", wheel)
        z.writestr(f"{info}/RECORD", "")
    return whl


def _venv(where: Path, wheel: Path | None) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )  # fmt: skip
    (site / "project.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # after its own packages
    if wheel is not None:
        with zipfile.ZipFile(wheel) as z:
            z.extractall(site)
    return python


def _repro(python: Path, project: Path, cache: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO), "REPRO_CACHE_DIR": str(cache), "NO_COLOR": "1"}
    r = subprocess.run(
        [str(python), "-m", "repro", *args], cwd=project, env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("venvs")
    return _venv(base / "a", None), _venv(base / "b", _wheel(base))


def _installed_idna(python: Path) -> str:
    code = "from importlib import metadata; print(metadata.version('idna'))"
    out = subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def test_the_same_requirements_lock_to_the_same_bytes_from_two_environments(
    envs: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = envs
    assert _installed_idna(a) != _installed_idna(b) == OLD
    locks = []
    for name, python in (("a", a), ("b", b)):
        project = tmp_path / name
        project.mkdir()
        (project / "requirements.in").write_text("idna\n")
        _repro(python, project, tmp_path / f"cache-{name}", "lock")
        locks.append((project / "lockfiles" / "requirements.lock.txt").read_bytes())
    assert locks[0] == locks[1]
    assert b"# held:" not in locks[0] and b"idna==" in locks[0] and b"/tmp" not in locks[0]


def test_the_local_backends_lock_holds_what_each_environment_has(
    envs: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = envs
    show = (
        "from repro.facts import lockvariants; print(lockvariants.resolution('local', 'idna\\n').constraints)"
    )
    for python, version in ((a, _installed_idna(a)), (b, OLD)):
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        out = subprocess.run([str(python), "-c", show], env=env, check=True, capture_output=True, text=True)
        assert out.stdout.strip() == repr((f"idna=={version}",))
    project = tmp_path / "local"
    project.mkdir()
    (project / "requirements.in").write_text("idna\n")
    _repro(a, project, tmp_path / "cache", "lock", "--variant", "local")
    text = (project / ".repro" / "locks" / "requirements-local.lock.txt").read_text()
    assert f"# held: idna=={_installed_idna(a)}\n" in text and "# variant: local\n" in text
