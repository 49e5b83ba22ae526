"""The command table, and the group that imports a command's module only when that command runs.

`repro --help`, `repro ls` and shell completion would otherwise pay for importing every command
family (and through them the whole core) before anything runs. The table names each command's
module, the function click made of it and its one-line summary, in one place: `repro --help` and
the completion of command names are answered from it; `get_command` imports the module.
A test (tests/cli/test_help_and_docs.py) holds each summary to the command's own help.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import click
from click.shell_completion import CompletionItem


class Entry:
    """Where a command lives (``repro.cli.<module>``, attribute ``attr``) and what it does, in a line."""

    __slots__ = ("attr", "module", "summary")

    def __init__(self, module: str, attr: str, summary: str) -> None:
        self.module = module
        self.attr = attr
        self.summary = summary


TABLE: dict[str, Entry] = {
    "run": Entry(
        "run_cmd",
        "run",
        "Run COMMAND under repro and seal its record.",
    ),
    "ls": Entry(
        "records_cmd",
        "ls",
        "List the runs of this project, newest first (incomplete ones included).",
    ),
    "show": Entry(
        "records_cmd",
        "show",
        "Show a run's record, its lock listed in full (wheels and source builds); for a capsule "
        "that carries an attestation or an OpenSSF model signature (`export --attest [--format "
        "oms]`), what it names (checked by `verify-attestation`).",
    ),
    "export": Entry(
        "records_cmd",
        "export",
        "Write a run as a capsule .tar (deterministic bytes), or as a job for a cluster.",
    ),
    "get": Entry(
        "records_cmd",
        "get",
        "Write a run's outputs (or the PATHs named: files or directories) into a directory, each "
        "checked against its recorded hash.",
    ),
    "verify": Entry(
        "records_cmd",
        "verify",
        "Check a capsule's integrity: every member against its checksum, every blob against its "
        "content-address name, every path in the record inside its root.",
    ),
    "keygen": Entry(
        "records_cmd",
        "keygen",
        "Write a new signing key at PATH, mode 0600; never overwrites a file.",
    ),
    "attest": Entry(
        "attest_cmd",
        "attest",
        "Write an in-toto attestation of a run: which files it produced (name and SHA-256), from "
        "which code, data, lock and image, with which command, seed and mode (SLSA provenance "
        "v1), in a DSSE envelope signed with an Ed25519 (or ECDSA P-256) key.",
    ),
    "verify-attestation": Entry(
        "attest_cmd",
        "verify_attestation",
        "Check an attestation's signature with a public key, and that each --artifact is attested.",
    ),
    "push": Entry(
        "share_cmd",
        "push",
        "Push RUN to a registry as an OCI artifact: the record and every blob as content-"
        "addressed layers, so a sibling run uploads only what the registry does not hold yet.",
    ),
    "pull": Entry(
        "share_cmd",
        "pull",
        "Pull the run REF names into this project's store, every layer checked against its digest"
        " and the whole checked as a capsule from elsewhere is; then `repro replay RUN` replays "
        "it.",
    ),
    "replay": Entry(
        "replay_cmd",
        "replay",
        "Re-execute a run from its record and prove whether the result came back.",
    ),
    "diff": Entry(
        "diff_cmd",
        "diff",
        "Show what differs between RUN_A and RUN_B, and the likely causes, ranked.",
    ),
    "check": Entry(
        "check_cmd",
        "check",
        "Fail when a training command does not reproduce: the CI gate.",
    ),
    "resume": Entry(
        "resume_cmd",
        "resume",
        "Continue an interrupted, failed or killed run as a new run linked to it.",
    ),
    "build": Entry(
        "docker_cmd",
        "build",
        "Build (or reuse) the environment image for the current lockfile, without running.",
    ),
    "base-image": Entry(
        "docker_cmd",
        "base_image",
        "Make a minimal Debian base image from packages (debootstrap + docker import, as root; "
        "without root: mmdebstrap --mode=unshare + podman import, into your rootless Podman "
        "storage).",
    ),
    "gc": Entry(
        "docker_cmd",
        "gc",
        "Remove leftovers: incomplete runs, partial blobs, containers of runs whose repro died, "
        "kept checkpoint copies and outputs of older runs over store.max_bytes (then says the "
        "bytes and files freed); with --images, images this store's runs made that no run still "
        "in the store uses (never another store's, the base image, one built on top of it or "
        "tagged outside repro-env), and the image archives Slurm jobs' nodes loaded them from "
        "(and those images from the nodes' Podman storages this machine sees).",
    ),
    "lock": Entry(
        "lock_cmd",
        "lock",
        "Compile the project's lockfile (pip-compile --generate-hashes): one progress line, the "
        "full log of pip-compile in .repro/logs/ (shown with -v, and on failure).",
    ),
}


class LazyGroup(click.Group):
    """A click group whose commands are the table's, each imported on first use.

    ``prepare`` is applied once to each command when it is loaded (the group adds -q/-v to each).
    """

    def __init__(self, *args: object, prepare: Callable[[click.Command], None], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.prepare = prepare

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*TABLE, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands or cmd_name not in TABLE:
            return self.commands.get(cmd_name)
        return self.load(cmd_name)

    def load(self, name: str) -> click.Command:
        """The command ``name``, its module imported now if it was not yet.

        Raises:
            KeyError: no such command in the table.
        """
        if name not in self.commands:
            entry = TABLE[name]
            command = getattr(importlib.import_module(f"repro.cli.{entry.module}"), entry.attr)
            assert isinstance(command, click.Command), name
            self.prepare(command)
            self.add_command(command, name)
        return self.commands[name]

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click's, an unknown name answered with the close ones among all commands ("Did you mean")."""
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as e:
            raise click.exceptions.NoSuchCommand(
                args[0], possibilities=self.list_commands(ctx), ctx=ctx
            ) from e

    def summary(self, name: str, limit: int) -> str:
        """A command's short help as click writes it, from the table when it is not loaded."""
        if name in self.commands or name not in TABLE:
            return self.commands[name].get_short_help_str(limit)
        return click.Command(name, help=TABLE[name].summary).get_short_help_str(limit)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = [n for n in self.list_commands(ctx) if n in TABLE or not self.commands[n].hidden]
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        with formatter.section("Commands"):
            formatter.write_dl([(n, self.summary(n, limit)) for n in names])

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        """Command names from the table (no module imported), then the group's options."""
        names = [n for n in self.list_commands(ctx) if n.startswith(incomplete)]
        found = [CompletionItem(n, help=self.summary(n, 45)) for n in names]
        return found + click.Command.shell_complete(self, ctx, incomplete)
