"""The code: git state (GitPython) and a content snapshot of every file that ran.

Every file of the working tree that git would carry (tracked and untracked-not-ignored)
or, outside git, every file not excluded by `.reproignore`, is hashed and stored by
hash, so a capsule restores the exact code without access to the repository. Capsules that
`repro export` wrote into the project (untracked) are repro's own files: never code, never dirt.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pathspec

from repro.capsule import CodeInfo, FileEntry, is_capsule_file
from repro.capture.secrets import is_credential_content, is_secret_file, strip_url_credentials
from repro.errors import ReproError, UsageError
from repro.hashing import HashCache, hash_file_cached

# Never part of a code snapshot, git or not.
ALWAYS_EXCLUDED = (
    ".repro",
    ".git",
    ".venv",
    "venv",
    "__pycache__",
    "*.pyc",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".ipynb_checkpoints",
    "node_modules",
    # logs, often the run's own output redirected by the shell (`python train.py > train.log`)
    "*.log",
    "nohup.out",
    ".cache",  # tool caches kept in the project (CI runners' pip cache)
)

PutFile = Callable[[Path, str], str]  # (path, digest) -> the stored digest, stores the bytes once
# Files that may be credentials under any name; their first bytes decide.
_CREDENTIAL_SUFFIXES = (".json", ".ini", ".cfg", ".conf", ".yaml", ".yml")


def _credential_content(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return is_credential_content(f.read(64 * 1024))
    except OSError:
        return False


@dataclass
class CodeCapture:
    info: CodeInfo
    warnings: list[str] = field(default_factory=list)
    patch: str = ""  # `git diff HEAD --binary`, stored as a blob by `store_patch`


class Ignore:
    """`.reproignore` with gitignore's rules (pathspec): negation, anchoring, `**`, dir-only
    patterns; plus the built-in exclusions and the project's data and output paths."""

    def __init__(self, patterns: list[str]) -> None:
        self.spec = pathspec.GitIgnoreSpec.from_lines(patterns)

    @classmethod
    def for_project(cls, root: Path, extra: list[str]) -> Ignore:
        """Built-ins, then ``extra`` project-relative paths (anchored at the root), then `.reproignore`.

        Raises:
            UsageError: a `.reproignore` pattern that is not valid gitignore syntax.
        """
        lines = list(ALWAYS_EXCLUDED) + ["/" + e.strip("/") for e in extra if e.strip("/")]
        ignore_file = root / ".reproignore"
        if ignore_file.is_file():
            lines += ignore_file.read_text().splitlines()
        try:
            return cls(lines)
        except (ValueError, TypeError) as e:
            raise UsageError(f"{ignore_file} has a pattern git would not accept: {e}") from e

    def __call__(self, rel: str, is_dir: bool = False) -> bool:
        return bool(self.spec.match_file(rel + "/" if is_dir else rel))


def capture_code(
    root: Path,
    put_file: PutFile,
    *,
    exclude: list[str],
    cache: HashCache | None = None,
    max_file_bytes: int = 16 * 1024 * 1024,
    earlier_writers: Callable[[dict[str, str]], dict[str, str]] | None = None,
) -> CodeCapture:
    """Record the code at ``root`` (git metadata when it is a work tree) and store its files.

    ``exclude`` names project-relative paths that are not code (data, outputs).
    ``earlier_writers`` (``Store.earlier_writers``) names the untracked files an earlier run
    wrote byte for byte (a ``model.pt`` left in the working directory): they stay in the
    snapshot, listed as ``earlier_outputs``, and alone do not make the tree dirty.

    Raises:
        UsageError: git fails to read the repository.
    """
    ignore = Ignore.for_project(root, exclude)
    git_root = _git_toplevel(root)
    capture = CodeCapture(CodeInfo())
    if git_root is not None:
        rels, untracked = _git_state(root, git_root, capture)
    else:
        rels, untracked = _walk(root, ignore), set()
        capture.info.kind = "snapshot"
    candidates: dict[str, str] = {}  # untracked (or snapshot) files: path → hash
    for rel in rels:
        if ignore(rel):
            continue
        if is_secret_file(rel):
            capture.info.excluded.append(rel)
            continue
        path = root / rel
        if not path.is_file():
            continue  # deleted in the work tree, or a broken link
        if (rel in untracked or git_root is None) and _own_capsule(rel, path):
            continue  # a capsule repro exported into the project is repro's file, not code
        digest = hash_file_cached(path, cache)
        if rel in untracked or git_root is None:
            candidates[rel] = digest
        size = path.stat().st_size
        if rel.endswith(_CREDENTIAL_SUFFIXES) and size <= 1 << 20 and _credential_content(path):
            capture.info.excluded.append(rel)
            continue
        stored = size <= max_file_bytes
        if stored:
            digest = put_file(path, digest)  # the stored digest: a file holding a secret is masked
        else:
            capture.warnings.append(
                f"code file {rel} ({size} bytes) is over the size limit: hashed, not stored"
            )
        entry = FileEntry(rel, size, digest, stored)
        capture.info.files.append(entry)
        if rel in untracked:
            capture.info.untracked.append(entry)
    if earlier_writers is not None:
        capture.info.earlier_outputs = earlier_writers(candidates)
    if any(e.path not in capture.info.earlier_outputs for e in capture.info.untracked):
        capture.info.dirty = True
    if capture.info.excluded:
        capture.warnings.append(
            "left out of the code snapshot as secret-looking: " + ", ".join(capture.info.excluded[:10])
        )
    return capture


def _own_capsule(rel: str, path: Path) -> bool:
    return rel.endswith(".tar") and is_capsule_file(path)


def _git_toplevel(root: Path) -> Path | None:
    for d in (root, *root.parents):
        if (d / ".git").exists():
            return d
    return None


def _git_state(root: Path, git_root: Path, capture: CodeCapture) -> tuple[list[str], set[str]]:
    """Fill git metadata and the patch; return (files to snapshot, the untracked ones).

    Paths (and the patch) are relative to the project root, which may sit below the
    top of the work tree.
    """
    import git  # GitPython lives here only

    info = capture.info
    info.kind = "git"
    if root != git_root:
        info.subdir = root.relative_to(git_root).as_posix()
    try:
        repo = git.Repo(git_root)
        with repo:
            cmd = git.Git(root)
            has_head = repo.head.is_valid()
            # Submodules' files too: a capsule that left them out would not import elsewhere.
            tracked = cmd.ls_files("-z", "--cached", "--recurse-submodules").split("\0")
            _warn_empty_submodules(cmd, root, capture)
            untracked = cmd.ls_files("-z", "--others", "--exclude-standard").split("\0")
            secret = sorted(f for f in tracked if f and is_secret_file(f))
            if has_head:
                info.commit = repo.head.commit.hexsha
                info.branch = None if repo.head.is_detached else repo.active_branch.name
                # Secret-looking tracked files (a modified .env) stay out of the patch too.
                patch = cmd.diff(
                    "HEAD", "--binary", "--no-color", "--no-ext-diff", "--relative", "--", ".",
                    *(f":(exclude,literal){f}" for f in secret),
                )  # fmt: skip
                changed = cmd.diff("HEAD", "--name-only", "--relative", "--", *secret) if secret else ""
                left_out = [f for f in changed.splitlines() if f]
                if left_out:
                    capture.warnings.append(
                        "changes to secret-looking tracked files were left out of the patch: "
                        + ", ".join(left_out[:10])
                    )
            else:
                capture.warnings.append(
                    "the git repository has no commits yet; recorded as uncommitted files"
                )
                patch = ""
            remote = next(iter(repo.remotes), None)
            if remote is not None:
                urls = list(remote.urls)
                info.remote = strip_url_credentials(urls[0]) if urls else None
            info.dirty = bool(patch) or not has_head  # untracked code is added once it is filtered
    except git.GitCommandError as e:
        raise UsageError(
            f"git could not read {root}: {e.stderr.strip() or e}", hint="check `git status`"
        ) from e
    except (git.InvalidGitRepositoryError, ValueError) as e:
        raise UsageError(f"{root} is not a readable git repository: {e}") from e
    capture.patch = patch
    files = sorted({f for f in tracked + untracked if f})
    return files, {u for u in untracked if u}


def _warn_empty_submodules(cmd: Any, root: Path, capture: CodeCapture) -> None:
    """Name the submodules whose files are not checked out (so they cannot be captured)."""
    staged = cmd.ls_files("-z", "--stage").split("\0")
    links = [line.split("\t", 1)[1] for line in staged if line.startswith("160000 ") and "\t" in line]
    empty = [p for p in links if not (root / p).is_dir() or not any((root / p).iterdir())]
    if empty:
        capture.warnings.append(
            "git submodules not checked out, so their files are not in the capsule: "
            + ", ".join(empty[:10])
            + " (run `git submodule update --init`)"
        )


def store_patch(capture: CodeCapture, put_bytes: Callable[[bytes], str]) -> None:
    """Store the uncommitted patch (if any) as a blob and reference it from the record."""
    if capture.patch:
        capture.info.patch = put_bytes(capture.patch.encode("utf-8", "surrogateescape") + b"\n")


def _walk(root: Path, ignore: Ignore) -> list[str]:
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
        dirnames[:] = sorted(d for d in dirnames if not ignore(rel_dir + d, is_dir=True))
        found += [rel_dir + f for f in filenames]
    return sorted(found)


def restore_code(info: CodeInfo, blob_path: Callable[[str], Path], dest: Path) -> list[str]:
    """Write the recorded files into ``dest``; returns the files that could not be restored.

    Raises:
        ReproError: a recorded path escapes ``dest``.
    """
    import shutil

    missing: list[str] = []
    dest = dest.resolve()
    for entry in info.files:
        target = (dest / entry.path).resolve()
        if not target.is_relative_to(dest):
            raise ReproError(f"code path {entry.path!r} escapes the restore directory")
        src = blob_path(entry.hash)
        if not entry.stored or not src.is_file():
            missing.append(entry.path)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
    return missing
