"""The code: git state (GitPython) and a content snapshot of every file that ran.

Every file git tracks, every untracked-not-ignored source file, or, outside git, every file not
excluded by `.reproignore`, is hashed and stored by hash, so a capsule restores the exact code
without access to the repository. Untracked files of other kinds are listed with their hash only
(`CodeInfo.listed`): the ones the run reads become its inputs. repro's own
stdout and stderr, when the shell sent them to a file in the project (`repro run … > train.out
2>&1 &`, `nohup`), are never code: that file grows while the run is captured and resumed.
Capsules that `repro export` wrote into the project (untracked) are repro's own files: never
code, never dirt.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pathspec

from repro.errors import ReproError, UsageError
from repro.facts.secrets import Masker, credential_in_file, is_secret_file
from repro.facts.secrets.files import (
    CONFIG_SUFFIXES,
    MAX_CONFIG_BYTES,
    code_secrets,
    config_text_secrets,
    credential_at,
)
from repro.facts.secrets.rules import is_secret_name, strip_url_credentials
from repro.facts.secrets.verdicts import Verdicts
from repro.store.hashing import hash_bytes
from repro.store.processes import own_output_files
from repro.store.record import CodeInfo, FileEntry, RunWarning
from repro.store.statcache import HashCache, hash_files_cached
from repro.store.treehash import gc_paused
from repro.store.verify import is_capsule_file

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

# Files an interpreter may import: judged as code whether or not a run was seen reading them
# (a module imported late in training is not read yet when the run is killed). An untracked file of
# another kind is listed, not code: an input when the run reads it (README, "What a run records").
SOURCE_SUFFIXES = (".py", ".so", ".pyd")


def is_source(rel: str) -> bool:
    """Whether an untracked file is code: a file the interpreter may import."""
    return rel.endswith(SOURCE_SUFFIXES)


PutFile = Callable[[str, str], str]  # (absolute path, digest) -> the stored digest, stores the bytes once


class Blobs(Protocol):
    """Where code files go (the store)."""

    def put_file(self, path: str | Path, digest: str | None = None) -> str: ...

    def put_bytes(self, data: bytes) -> str: ...


class MaskedPut:
    """Stores code files with their secrets masked (`masked_code`): a file with nothing to mask is
    stored as it is; one with something, under the digest of its masked bytes.

    ``verdicts`` remembers the files found clean under today's rules (`secrets.verdicts`): such a
    file is only searched for the run's known values, and not read at all when there are none.
    ``found``: the config values masked so far, for the run to mask wherever else they show.
    """

    def __init__(self, blobs: Blobs, masker: Masker, root: Path, verdicts: Verdicts | None = None) -> None:
        self.blobs, self.masker, self.root, self.verdicts = blobs, masker, root, verdicts
        self.found: set[str] = set()

    def credential(self, path: str | Path, digest: str) -> str | None:
        """What credential the file holds (`secrets.credential_in_file`); None for a known-clean one."""
        if self.verdicts is not None and self.verdicts.clean(digest):
            return None
        return credential_in_file(path)

    def __call__(self, path: str | Path, digest: str) -> str:
        known_clean = self.verdicts is not None and self.verdicts.clean(digest)
        if known_clean and not self.masker.values:
            return self.blobs.put_file(path, digest)
        path = Path(path)
        raw = path.read_bytes()
        where = f"code file {_rel(path, self.root)}"
        if known_clean:
            masked = self.masker.data(raw, where, printed=False, shapes=False)
        else:
            masked, found = masked_code(path, raw, self.masker, self.root)
            self.found |= found
            if self.verdicts is not None and not found and masked == self.masker.data(raw, shapes=False):
                self.verdicts.add(digest)  # only known values (if any) were masked: clean by the rules
        return self.blobs.put_file(path, digest) if masked == raw else self.blobs.put_bytes(masked)


def masked_code(path: Path, raw: bytes, masker: Masker, root: Path) -> tuple[bytes, set[str]]:
    """A code file's bytes as stored: values the masker knows and credential shapes masked, the string
    literals the code gives to credential names (`secrets.code_secrets`), and in a config file (YAML,
    JSON, TOML, INI) the values under credential keys; plus the values found."""
    found: set[str] = set()
    if len(raw) <= MAX_CONFIG_BYTES and b"\0" not in raw[:8192]:
        text = raw.decode("utf-8", "replace")
        found = code_secrets(text, masker.redactor)
        if path.name.lower().endswith(CONFIG_SUFFIXES):
            found |= config_text_secrets(text, path.suffix.lower(), masker.redactor)
        if found:
            masker = masker.add(found)
    return masker.data(raw, f"code file {_rel(path, root)}", printed=False), found


def stored_digest(path: Path, masker: Masker, root: Path) -> str:
    """The digest a run would store a code file under (that of its masked bytes)."""
    return hash_bytes(masked_code(path, path.read_bytes(), masker, root)[0])


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name


@dataclass
class CodeCapture:
    info: CodeInfo
    warnings: list[RunWarning] = field(default_factory=list)
    patch: str = ""  # `git diff HEAD --binary`, stored as a blob by `store_patch`


class Ignore:
    """`.reproignore` with gitignore's rules (pathspec): negation, anchoring, `**`, dir-only
    patterns; plus the built-in exclusions and the project's data and output paths."""

    def __init__(self, patterns: list[str]) -> None:
        self.spec = pathspec.GitIgnoreSpec.from_lines(patterns)
        self._any = _any_pattern(self.spec)

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
        name = rel + "/" if is_dir else rel
        if self._any is not None and not rel.startswith(("/", "./")) and self._any.search(name) is None:
            return False  # no pattern matches at all (most files): gitignore's precedence is moot
        return bool(self.spec.match_file(name))


def _any_pattern(spec: pathspec.GitIgnoreSpec) -> re.Pattern[str] | None:
    """One regular expression that matches wherever any of ``spec``'s patterns does (negations too),
    so a path none of them matches is told apart in one search; None when they cannot be joined."""
    parts: list[str] = []
    for pattern in spec.patterns:
        regex = getattr(pattern, "regex", None)
        if getattr(pattern, "include", None) is None or regex is None:
            continue
        if not isinstance(regex.pattern, str) or "(?P=" in regex.pattern or regex.flags & ~re.UNICODE:
            return None
        parts.append("(?:" + re.sub(r"\(\?P<\w+>", "(?:", regex.pattern) + ")")
    try:
        return re.compile("|".join(parts)) if parts else re.compile("(?!)")
    except re.error:
        return None


@gc_paused()  # 50,000 files make 100,000 records, none of them in a cycle
def capture_code(
    root: Path,
    put_file: PutFile,
    *,
    exclude: list[str],
    cache: HashCache | None = None,
    max_file_bytes: int = 16 * 1024 * 1024,
    earlier_writers: Callable[[dict[str, str]], dict[str, str]] | None = None,
    credential: Callable[[str, str], str | None] | None = None,
) -> CodeCapture:
    """Record the code at ``root`` (git metadata when it is a work tree) and store its files.

    A file holding a credential (``credential``, by default `secrets.credential_in_file`: a key
    block, a service-account file, whatever its name) is left out and named in a warning.

    ``exclude`` names project-relative paths that are not code (data, outputs).
    ``earlier_writers`` (``Store.earlier_writers``) names the untracked files an earlier run
    wrote byte for byte (a ``model.pt`` left in the working directory): they stay in the
    snapshot, listed as ``earlier_outputs``, and alone do not make the tree dirty.

    Raises:
        UsageError: git fails to read the repository.
    """
    ignore = Ignore.for_project(root, exclude)
    own = own_output_files()
    git_root = _git_toplevel(root)
    capture = CodeCapture(CodeInfo())
    untracked: set[str] = set()
    if git_root is not None:
        rels, untracked = _git_state(root, git_root, capture)
        found = _stat_listed(root, rels, ignore, capture.info.excluded)
    else:
        found = _walk(root, ignore, capture.info.excluded)
        capture.info.kind = "snapshot"
    found = [
        (rel, path, st)
        for rel, path, st in found
        if (st.st_dev, st.st_ino) not in own  # not the log repro's own output goes to
        # a capsule repro exported into the project is repro's file, not code
        and not ((rel in untracked or git_root is None) and _own_capsule(rel, path))
    ]
    digests = hash_files_cached([(path, st) for _, path, st in found], cache)
    candidates: dict[str, str] = {}  # untracked (or snapshot) files: path → hash
    held: dict[str, str] = {}  # files left out for what they hold: path → what
    holds = credential or (lambda path, _digest: credential_in_file(path))
    for (rel, path, st), digest in zip(found, digests, strict=True):
        if rel in untracked or git_root is None:
            candidates[rel] = digest
        size = st.st_size
        stored = size <= max_file_bytes
        what = credential_at(path, rel) or (holds(path, digest) if stored else None)
        if what is not None:  # a credential is left out and named, neither stored nor listed
            capture.info.excluded.append(rel)
            held[rel] = what
            continue
        if rel in untracked and not is_source(rel):
            capture.info.listed.append(FileEntry(rel, size, digest))  # an input if the run reads it
            continue
        if stored:
            digest = put_file(path, digest)  # the stored digest: a file holding a secret is masked
        else:
            capture.warnings.append(
                RunWarning(
                    "code_file_too_large",
                    f"code file {rel} ({size} bytes) is over the size limit: hashed, not stored",
                )
            )
        entry = FileEntry(rel, size, digest, stored)
        capture.info.files.append(entry)
        if rel in untracked:
            capture.info.untracked.append(entry)
    capture.info.excluded.sort()  # secret by name or by content, in path order
    _conclude(capture, candidates, held, earlier_writers)
    _drop_from_patch(capture, held)
    return capture


def _drop_from_patch(capture: CodeCapture, held: dict[str, str]) -> None:
    """Leave the changes to files held for a credential out of the patch: a key block appended to a
    tracked file is carried by neither the snapshot nor the patch."""
    if not held or not capture.patch:
        return
    kept: list[str] = []
    dropped: list[str] = []
    for section in _patch_sections(capture.patch):
        name = next((rel for rel in held if _section_of(section, rel)), None)
        if name is None:
            kept.append(section)
        elif name not in dropped:
            dropped.append(name)
    if dropped:
        capture.patch = "".join(kept)
        capture.warnings.append(
            RunWarning(
                "secret_changes_excluded",
                "changes to files holding a credential were left out of the patch: "
                + ", ".join(dropped[:10]),
            )
        )


def _patch_sections(patch: str) -> list[str]:
    """A git patch cut before each `diff --git` line (a first piece without one stays whole)."""
    sections: list[str] = []
    for line in patch.splitlines(keepends=True):
        if line.startswith("diff --git ") or not sections:
            sections.append(line)
        else:
            sections[-1] += line
    return sections


def _section_of(section: str, rel: str) -> bool:
    header = section.split("\n", 1)[0]
    quoted = '"a/' + rel.replace("\\", "\\\\").replace('"', '\\"')
    return header == f"diff --git a/{rel} b/{rel}" or header.startswith(f"diff --git {quoted}")


def _conclude(
    capture: CodeCapture,
    candidates: dict[str, str],
    held: dict[str, str],
    earlier_writers: Callable[[dict[str, str]], dict[str, str]] | None,
) -> None:
    """Name the untracked files earlier runs left, decide whether the tree is dirty, and warn about the
    files left out as secret-looking (``held``: path → what it holds)."""
    if earlier_writers is not None:
        capture.info.earlier_outputs = earlier_writers(candidates)
    if any(e.path not in capture.info.earlier_outputs for e in capture.info.untracked):
        capture.info.dirty = True
    if capture.info.excluded:
        named = [f"{rel} ({held[rel]})" if rel in held else rel for rel in capture.info.excluded]
        more = len(named) - 10
        capture.warnings.append(
            RunWarning(
                "secret_files_excluded",
                "left out of the code snapshot as secret-looking: "
                + ", ".join(named[:10])
                + (f" (+{more} more)" if more > 0 else ""),
            )
        )


def _own_capsule(rel: str, path: str) -> bool:
    return rel.endswith(".tar") and is_capsule_file(Path(path))


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
                        RunWarning(
                            "secret_changes_excluded",
                            "changes to secret-looking tracked files were left out of the patch: "
                            + ", ".join(left_out[:10]),
                        )
                    )
            else:
                capture.warnings.append(
                    RunWarning(
                        "no_commits", "the git repository has no commits yet; recorded as uncommitted files"
                    )
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
            RunWarning(
                "submodules_missing",
                "git submodules not checked out, so their files are not in the capsule: "
                + ", ".join(empty[:10])
                + " (run `git submodule update --init`)",
            )
        )


def files_read(info: CodeInfo, read: set[str]) -> list[str]:
    """The files of the snapshot ``info`` among ``read`` (project-relative paths a run opened);
    a ``__pycache__`` file counts as the source it was compiled from (the import that read it)."""
    import importlib.util

    files = {e.path for e in info.files}
    found = set(info.read or ())  # a resumed run: what the runs before it read counts too
    for rel in read:
        if "__pycache__/" in rel and rel.endswith(".pyc"):
            try:
                rel = Path(importlib.util.source_from_cache(rel)).as_posix()
            except ValueError:
                continue
        if rel in files:
            found.add(rel)
    return sorted(found)


def store_patch(capture: CodeCapture, put_bytes: Callable[[bytes], str]) -> None:
    """Store the uncommitted patch (if any) as a blob and reference it from the record."""
    if capture.patch:
        capture.info.patch = put_bytes(capture.patch.encode("utf-8", "surrogateescape") + b"\n")


_Found = tuple[str, str, os.stat_result]  # (project-relative path, absolute path, its stat)


def _walk(root: Path, ignore: Ignore, excluded: list[str]) -> list[_Found]:
    """The regular files (or links to one) of a project outside git, in path order, each stat'ed once:
    not those `.reproignore` or the built-ins exclude (an excluded directory is not entered, nor is a
    link to one); secret-looking names go to ``excluded``."""
    base = os.path.abspath(root)
    found: list[_Found] = []
    stack = [""]
    search = ignore._any.search if ignore._any is not None else None  # clears most files at once
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(base + "/" + rel_dir if rel_dir else base) as it:
                entries = list(it)
        except OSError:
            continue  # unreadable, or gone since it was listed
        for e in entries:
            rel = rel_dir + e.name
            try:
                is_dir = e.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                if not e.is_symlink() and not ignore(rel, is_dir=True):
                    stack.append(rel + "/")
            elif (search is not None and search(rel) is None) or not ignore(rel):
                if is_secret_name(e.name):
                    excluded.append(rel)
                    continue
                try:
                    st = e.stat()
                except OSError:
                    continue  # gone since it was listed, or a broken link
                if stat.S_ISREG(st.st_mode):
                    found.append((rel, e.path, st))
    found.sort(key=_first)
    return found


def _stat_listed(root: Path, rels: list[str], ignore: Ignore, excluded: list[str]) -> list[_Found]:
    """The regular files (or links to one) among ``rels`` (git's list, in path order), each stat'ed
    once; secret-looking names go to ``excluded``."""
    base = os.path.abspath(root)
    found: list[_Found] = []
    for rel in rels:
        if not ignore(rel):
            path = base + "/" + rel
            _add_file(found, excluded, rel, path, functools.partial(os.stat, path))
    return found


def _add_file(
    found: list[_Found], excluded: list[str], rel: str, path: str, stat_of: Callable[[], os.stat_result]
) -> None:
    if is_secret_file(rel):
        excluded.append(rel)
        return
    try:
        st = stat_of()
    except OSError:
        return  # deleted in the work tree, or a broken link
    if stat.S_ISREG(st.st_mode):
        found.append((rel, path, st))


def _first(item: _Found) -> str:
    return item[0]


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


def tracked(root: Path, rel: str) -> bool | None:
    """Whether git tracks the project file ``rel`` (committed or staged); None outside a git work tree.

    Raises nothing: a git that cannot answer reads as "not known" (None).
    """
    if _git_toplevel(root) is None:
        return None
    import git  # GitPython lives here only

    try:
        return bool(git.Git(root).ls_files("--", rel).strip())
    except (git.GitCommandError, OSError):
        return None
