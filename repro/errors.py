"""The ReproError tree and the exit-code table (README, "Exit codes")."""

from __future__ import annotations

import errno
from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    UNEXPECTED = 1
    # A check whose answer is "no": `lock --check` (the lock is stale), `diff --exit-code` (the runs
    # differ). 1, as `uv lock --check`, `git diff --exit-code`, ruff and mypy answer; never a usage error.
    DIFFERS = 1
    USAGE = 2
    BACKEND_UNAVAILABLE = 3
    COMMAND_FAILED = 4
    NOT_REPRODUCED = 5
    CAPSULE_INVALID = 6
    INTERRUPTED = 130


# The exit-code table: README "Exit codes" and the epilog of `repro --help` show these rows, as written.
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (ExitCode.OK, "success (`replay`/`check`: reproduced; `lock --check`: the lock is current)"),
    (
        ExitCode.DIFFERS,
        "`lock --check`: the lock is stale; `diff --exit-code`: the runs differ (as `uv lock --check` "
        "and `git diff --exit-code` answer); any other command: an unexpected error, or an OS error "
        "such as a full disk, named with its path",
    ),
    (
        ExitCode.USAGE,
        "usage or configuration error; a missing file or an unknown run ref; a registry that refuses "
        "the login",
    ),
    (
        ExitCode.BACKEND_UNAVAILABLE,
        "backend unavailable (no Docker engine with `--backend docker`, or for a capsule from elsewhere "
        "without `--backend local` and without rootless Podman; no `podman`, its base image or user "
        "namespaces with `--backend podman`; no GPU when asked for; a registry that does not answer)",
    ),  # fmt: skip
    (
        ExitCode.COMMAND_FAILED,
        "the training command itself failed (its exit status and last stderr lines are shown)",
    ),  # fmt: skip
    (ExitCode.NOT_REPRODUCED, "not reproduced (`replay`/`check`: diverged; changed data)"),
    (ExitCode.CAPSULE_INVALID, "capsule invalid, corrupt or tampered"),
    (ExitCode.INTERRUPTED, "interrupted (Ctrl-C, SIGTERM)"),
)


class ReproError(Exception):
    """Base of every error repro raises on purpose; carries an exit code and a hint."""

    exit_code: ExitCode = ExitCode.UNEXPECTED

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(ReproError):
    """Bad arguments, bad configuration, an unknown run ref."""

    exit_code = ExitCode.USAGE


class ConfigError(UsageError):
    """repro.yaml or [tool.repro] is malformed."""


class NotFoundError(UsageError):
    """A run ref, file or directory that does not exist."""


class SecretsInOutputs(UsageError):
    """A run whose outputs hold a credential, refused where the run would be handed over."""

    def __init__(self, run_id: str, found: list[tuple[str, str]]) -> None:
        self.run_id, self.found = run_id, found
        named = ", ".join(f"{path} ({kind})" for path, kind in found[:3])
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        super().__init__(
            f"outputs of run {run_id} hold a credential: {named}{more}; exporting them would hand it over",
            hint="keep credentials out of what the run saves and run it again, or pass "
            "--allow-secrets-in-outputs to export it as it is",
        )


class StoreConflict(UsageError):
    """The store already holds a different record under the same run id."""


class LockStale(ReproError):
    """The lockfile was compiled from other inputs than today's (`repro lock --check`)."""

    exit_code = ExitCode.DIFFERS


class BackendUnavailable(ReproError):
    """No Docker engine, or no GPU when one was asked for."""

    exit_code = ExitCode.BACKEND_UNAVAILABLE


class SandboxUnavailable(BackendUnavailable):
    """The container sandbox could not do a job (unpickle two tensor files): no engine, no image with what
    the job needs, or the job failed there. ``reason`` says which, for a verdict's detail."""

    NO_ENGINE = "no container engine answers to load them sandboxed"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BuildError(ReproError):
    """An image build or a dependency lock failed."""

    exit_code = ExitCode.UNEXPECTED


class IndexUnreadable(BuildError):
    """A package index or find-links location (from the host's pip configuration) that cannot be read."""

    def __init__(self, source: str, reason: str) -> None:
        self.source, self.reason = source, reason
        super().__init__(
            f"the package index {source} cannot be read: {reason}",
            hint="check the host's pip configuration (`pip config list`, PIP_INDEX_URL) and the network",
        )


class IndexUnreachable(BuildError):
    """The package index of the cuda.index setting does not answer: refused at once, not retried."""

    def __init__(self, index: str, reason: str) -> None:
        self.index, self.reason = index, reason
        super().__init__(
            f"the CUDA wheel index {index} (cuda.index) does not answer: {reason}",
            hint="set cuda.index (--cuda-index, REPRO_CUDA_INDEX or repro.yaml) to an index this machine "
            "reaches, or to `none` to take torch from the host's pip configuration",
        )


class CommandFailed(ReproError):
    """The training command itself exited non-zero."""

    exit_code = ExitCode.COMMAND_FAILED

    def __init__(
        self,
        exit_status: int,
        stderr_tail: list[str],
        run_id: str | None = None,
        message: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.exit_status = exit_status
        self.stderr_tail = stderr_tail
        self.run_id = run_id
        where = f" (run {run_id}, recorded as failed)" if run_id else ""
        super().__init__(
            message or f"the training command exited with status {exit_status}{where}",
            hint=hint or (f"repro show {run_id}" if run_id else None),
        )


class NotReproduced(ReproError):
    """A replay or check came back diverged."""

    exit_code = ExitCode.NOT_REPRODUCED


class DataDrift(NotReproduced):
    """The data a capsule names differs from the data on disk."""

    def __init__(
        self,
        changed: list[str],
        missing: list[str],
        extra: list[str],
        what: str = "data",
        hint: str | None = None,
    ) -> None:
        self.changed, self.missing, self.extra = changed, missing, extra
        parts = []
        for label, items in (("changed", changed), ("missing", missing), ("extra", extra)):
            if items:
                shown = ", ".join(items[:5]) + (f" (+{len(items) - 5} more)" if len(items) > 5 else "")
                parts.append(f"{label}: {shown}")
        super().__init__(
            f"{what} differs from the capsule's record — " + "; ".join(parts),
            hint=hint
            or "restore the recorded data, or point --data-root at a copy of it (with --allow-data-drift, "
            "the replay reads the data in that directory as it is)",
        )


class DataUnavailable(NotReproduced):
    """The recorded data is not here and could not be fetched where the record says it lives."""


class CapsuleInvalid(ReproError):
    """A capsule that is corrupt, truncated, tampered with, or of an unknown format."""

    exit_code = ExitCode.CAPSULE_INVALID

    def __init__(self, message: str, member: str | None = None, hint: str | None = None) -> None:
        self.member = member
        super().__init__(message, hint=hint or "re-export the capsule from its store with `repro export`")


class RegistryRefused(UsageError):
    """A registry that refuses the host's login for a repository, or asks for one the host does not have."""


class RegistryUnavailable(BackendUnavailable):
    """A registry that does not answer, answers outside the distribution API, or whose TLS certificate
    this host does not trust."""


class Interrupted(ReproError):
    """Ctrl-C or SIGTERM during a run."""

    exit_code = ExitCode.INTERRUPTED


class OSFailure(ReproError):
    """An operating-system error (a full disk, no permission, a read-only file system), by path."""

    exit_code = ExitCode.UNEXPECTED


_OS_HINTS = {
    errno.ENOSPC: "free space on that disk; `repro gc` removes incomplete runs and partial blobs",
    errno.EDQUOT: "free space within your quota; `repro gc` removes incomplete runs and partial blobs",
    errno.EACCES: "check the permissions of that path",
    errno.EPERM: "check the permissions of that path",
    errno.EROFS: "that file system is read-only; choose another path",
    errno.ENOENT: "check the path",
    errno.ELOOP: "a symbolic link there points to itself",
    errno.EISDIR: "give a file, not a directory",
}


def from_os_error(e: OSError, path: object = None) -> OSFailure:
    """One line for an OSError: what failed and where, and what to do about it. ``path`` names
    the place when the error does not (a write() that fails on a full disk names no file)."""
    what = e.strerror or type(e).__name__
    where = e.filename if e.filename is not None else path
    message = f"{what}: {where}" if where is not None else f"{what} ({type(e).__name__})"
    return OSFailure(message, hint=_OS_HINTS.get(e.errno or 0, "set REPRO_DEBUG=1 for a traceback"))
