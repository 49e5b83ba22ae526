"""Real project lockfiles made by their own tools (uv, Poetry, `pip lock`) against this machine's
package sources, as pip is configured: its find-links folders and file indexes (uv also needs
``--index-strategy unsafe-best-match`` to see every version across them). Poetry reads only
HTTP sources, so they are served on a loopback port for the time of `poetry lock`.

The projects lock torch==2.13.0 (the CPU wheel in a find-links folder), numpy pinned below the
newest release the sources hold, and tqdm in a development group.
"""

from __future__ import annotations

import contextlib
import functools
import html
import http.server
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from repro.fetch.reach import is_local, local_path
from repro.fetch.sources import host_sources

TORCH = "torch==2.13.0"
NUMPY = "2.2.6"  # older than the newest numpy the sources hold: the lock, not a resolution, decides
VENV_BIN = Path(sys.executable).parent
TRAIN = """\
import argparse

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

parser = argparse.ArgumentParser(description="a tiny regression, trained the usual way")
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--save", default="model.pt")
args = parser.parse_args()

torch.manual_seed(7)
rng = np.random.default_rng(7)
x = torch.from_numpy(rng.normal(size=(256, 4)).astype("float32"))
y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.1 * torch.randn(256, 1)
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
for step in tqdm(range(args.steps), mininterval=3600):
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"numpy {np.__version__} tqdm {__import__('tqdm').__version__} loss {loss.item():.6f}")
torch.save(model.state_dict(), args.save)
"""


@functools.cache
def local_sources() -> tuple[tuple[str, ...], tuple[Path, ...]]:
    """(the file indexes as URLs, the find-links folders) of pip's configuration that lie on this
    machine; a test skips when torch 2.13.0 is in none of them (a tool would fetch a CUDA torch)."""
    sources = host_sources()
    indexes = tuple(s if "://" in s else Path(s).as_uri() for s in sources.indexes if is_local(s))
    links = tuple(local_path(s) for s in sources.find_links if is_local(s) and local_path(s).is_dir())
    if not any(p.name.startswith("torch-2.13.0") for folder in links for p in folder.iterdir()):
        pytest.skip(
            "no find-links folder of pip's configuration holds torch 2.13.0 (tools would fetch CUDA torch)"
        )
    return indexes, links


def tool(name: str) -> str:
    """The path of a tool the project's dev extra installs (uv, poetry)."""
    found = shutil.which(name, path=str(VENV_BIN)) or shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (the dev extra installs it: make install)")
    return found


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})  # fmt: skip
    assert proc.returncode == 0, f"{argv[:3]} failed:\n{proc.stdout}\n{proc.stderr}"


def uv_env() -> dict[str, str]:
    indexes, links = local_sources()
    return {
        "UV_DEFAULT_INDEX": indexes[0], "UV_INDEX": " ".join(indexes[1:]),
        "UV_FIND_LINKS": ",".join(str(p) for p in links), "UV_INDEX_STRATEGY": "unsafe-best-match",
        "UV_OFFLINE": "1", "UV_PYTHON": sys.executable, "UV_NO_PROGRESS": "1",
    }  # fmt: skip


def make_uv_project(root: Path) -> None:
    """`uv init`, `uv add torch numpy`, `uv add --dev tqdm`, `uv lock`: a uv project with its uv.lock."""
    root.mkdir(parents=True, exist_ok=True)
    uv, env = tool("uv"), uv_env()
    _run([uv, "init", "--bare", "--name", "trainer", "--no-workspace", "."], root, env)
    with (root / "pyproject.toml").open("a") as f:  # one platform: the lock stays small
        f.write(
            "\n[tool.uv]\nenvironments = [\"sys_platform == 'linux' and platform_machine == 'x86_64'\"]\n"
        )
    _run([uv, "add", "--no-sync", TORCH, f"numpy=={NUMPY}"], root, env)
    _run([uv, "add", "--no-sync", "--dev", "tqdm"], root, env)
    _run([uv, "lock"], root, env)
    (root / "train.py").write_text(TRAIN)


def uv_lock(root: Path) -> None:
    """`uv lock` again (after pyproject.toml changed)."""
    _run([tool("uv"), "lock"], root, uv_env())


@contextlib.contextmanager
def served_sources(tmp: Path) -> Iterator[tuple[list[str], str]]:
    """The local sources over HTTP on a loopback port, while the block runs: (the index URLs, the
    URL of one page linking every find-links file)."""
    indexes, links = local_sources()
    site = tmp / "site"
    site.mkdir(parents=True, exist_ok=True)
    names = []
    for i, index in enumerate(indexes):  # an index folder is …/simple beside its files/
        folder = local_path(index)
        (site / f"i{i}").symlink_to(folder.parent)
        names.append(f"i{i}/{folder.name}/")
    rows = []
    for i, folder in enumerate(links):
        (site / f"l{i}").symlink_to(folder)
        rows += [
            f'<a href="l{i}/{html.escape(p.name)}">{html.escape(p.name)}</a>'
            for p in sorted(folder.iterdir())
        ]
    (site / "links.html").write_text("<html><body>\n" + "\n".join(rows) + "\n</body></html>\n")
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        yield [base + n for n in names], base + "links.html"
    finally:
        server.shutdown()
        server.server_close()


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that drops a download it no longer needs


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


POETRY_PYPROJECT = """\
[project]
name = "trainer"
version = "0.1.0"
requires-python = ">=3.11,<3.12"
dependencies = ["{torch}", "numpy=={numpy}"]

[tool.poetry]
package-mode = false
{sources}
[tool.poetry.dependencies]
torch = {{ source = "links" }}

[tool.poetry.group.dev.dependencies]
tqdm = "*"
"""


def make_poetry_project(root: Path, tmp: Path) -> None:
    """A Poetry project (`package-mode = false`, a dev group) and its poetry.lock from `poetry lock`."""
    root.mkdir(parents=True, exist_ok=True)
    poetry = tool("poetry")
    with served_sources(tmp) as (indexes, page):
        sources = (
            "".join(
                f'\n[[tool.poetry.source]]\nname = "i{i}"\nurl = "{url}"\npriority = '
                f'"{"primary" if i == 0 else "supplemental"}"\n'
                for i, url in enumerate(indexes)
            )
            + f'\n[[tool.poetry.source]]\nname = "links"\nurl = "{page}"\npriority = "explicit"\n'
        )
        (root / "pyproject.toml").write_text(
            POETRY_PYPROJECT.format(torch=TORCH, numpy=NUMPY, sources=sources)
        )
        env = {"POETRY_CACHE_DIR": str(tmp / "poetry-cache"), "POETRY_VIRTUALENVS_CREATE": "false",
               "POETRY_NO_INTERACTION": "1"}  # fmt: skip
        _run([poetry, "lock"], root, env)
    (root / "train.py").write_text(TRAIN)


def make_pip_lock_project(root: Path) -> None:
    """A requirements.txt project locked by `pip lock -r requirements.txt` (pylock.toml)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "requirements.txt").write_text(f"{TORCH}\nnumpy=={NUMPY}\ntqdm\n")
    pip_lock(root)
    (root / "train.py").write_text(TRAIN)


def make_projects(base: Path) -> dict[str, Path]:
    """The three projects under ``base`` by tool name (uv, poetry, pip), each locked once by its tool
    (Poetry takes some 20 s)."""
    make_uv_project(base / "uv")
    make_poetry_project(base / "poetry", base / "tmp")
    make_pip_lock_project(base / "pip")
    return {"uv": base / "uv", "poetry": base / "poetry", "pip": base / "pip"}


def pip_lock(root: Path) -> None:
    """`pip lock -r requirements.txt -o pylock.toml` against the local sources (pip ≥ 25.1 has it)."""
    from importlib.metadata import version

    from packaging.version import Version

    if Version(version("pip")) < Version("25.1"):
        pytest.skip(f"pip {version('pip')} has no `pip lock` (25.1 brought it)")
    indexes, links = local_sources()
    argv = [sys.executable, "-m", "pip", "lock", "-q", "-r", "requirements.txt", "-o", "pylock.toml",
            "--index-url", indexes[0], *[a for i in indexes[1:] for a in ("--extra-index-url", i)],
            *[a for p in links for a in ("--find-links", str(p))]]  # fmt: skip
    _run(argv, root, {"PIP_DISABLE_PIP_VERSION_CHECK": "1"})
