"""The `repro` command line: a click group, one module per command family.

Commands parse arguments, call the core and hand what it returns to `repro.ui`.
`main()` is the one wrapper that turns errors into exit codes (the README's "Exit codes" table).
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import click

from repro import __version__, ui
from repro.cli.context import AppContext
from repro.cli.lazy import LazyGroup
from repro.cli.verbosity import verbosity_options
from repro.errors import EXIT_CODES, ExitCode, ReproError, from_os_error


def _exit_codes_epilog() -> str:
    """The exit-code table (`repro.errors.EXIT_CODES`), kept as laid out (click's \\b)."""
    rows = ["\b", 'Exit codes (README, "Exit codes"):']
    for code, meaning in EXIT_CODES:
        wrapped = textwrap.wrap(meaning, 88) or [""]
        rows += [f"  {code:<5}{wrapped[0]}", *(f"       {line}" for line in wrapped[1:])]
    rows += ["", 'Shell completion: README, "Shell completion" (bash, zsh, fish).']
    return "\n".join(rows)


def _prepare(command: click.Command) -> None:
    """Each command takes -q/-v as the group does."""
    command.params.extend(verbosity_options())


# The commands are the table's (repro/cli/lazy.py); a command's module is imported when
# that command runs, so `repro --help`, `repro ls` and completion do not pay for the others.
@click.group(
    cls=LazyGroup,
    prepare=_prepare,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=_exit_codes_epilog(),
)
@click.version_option(__version__, prog_name="repro")
@click.option(
    "-C",
    "--project",
    "project_dir",
    type=click.Path(file_okay=False, exists=True),
    default=None,
    help="Run as if started in this directory.",
)
@click.pass_context
def cli(ctx: click.Context, project_dir: str | None) -> None:
    """repro: record, run, replay and compare deep-learning training runs.

    \b
    repro run train.py --lr 0.1          capture + run (docker when an engine answers, else local)
    repro ls / show RUN / export RUN     look at and share the records
    repro get RUN -o DIR                 write a run's outputs out, checked against their hashes
    repro verify capsule.tar             integrity check of an exported capsule
    repro keygen team.key                a signing key: export --sign, verify/replay --key
    repro attest RUN --sign me.key       an in-toto attestation of the run's outputs

    Every command with --json prints one JSON object whose "format" names its schema
    (repro/schemas/, README "Machine-readable output").

    -q and -v go before or after the subcommand (`repro -q run …`, `repro run -q …`).
    Colour follows NO_COLOR and FORCE_COLOR.
    """
    ctx.obj = AppContext(start=project_dir)
    _register_hooks()


def _register_hooks() -> None:
    """What every command may need, before it runs: the sandboxed unpickler, the oci:// remote."""
    from repro.compare.unpicklers import register_unpickler
    from repro.share import open_remote
    from repro.store.runs import register_remote

    # A tensor file that only full unpickling reads is loaded in the container sandbox, never here.
    register_unpickler(_unpickle_sandboxed)
    register_remote("oci", open_remote)  # every run ref may name a registry: oci://REGISTRY/REPO:TAG


def _unpickle_sandboxed(a: Path, b: Path, images: Sequence[str]) -> tuple[Path, Path]:
    """`repro.backends.unpickle.unpickle_sandboxed`, imported when a tensor file first needs it."""
    from repro.backends import unpickle

    return unpickle.unpickle_sandboxed(a, b, images)


cli.params.extend(verbosity_options())


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI and map every outcome to the exit-code table."""
    ui.reset()  # -q/-v are given anew each time (main runs many times in one test process)
    try:
        # Without standalone mode click returns the code of an `Exit` instead of raising it.
        code = cli.main(args=argv, prog_name="repro", standalone_mode=False)
    except ReproError as e:
        ui.build_failed(e.message)
        ui.error(e.message, e.hint)
        return int(e.exit_code)
    except click.exceptions.Abort:
        ui.error("interrupted")
        return int(ExitCode.INTERRUPTED)
    except KeyboardInterrupt:
        ui.error("interrupted")
        return int(ExitCode.INTERRUPTED)
    except click.exceptions.Exit as e:
        return int(e.exit_code)
    except click.ClickException as e:
        e.show()
        return int(ExitCode.USAGE)
    except BrokenPipeError:
        return int(ExitCode.OK)
    except OSError as e:  # a full disk, no permission: one line naming the path
        failure = from_os_error(e)
        ui.error(failure.message, failure.hint)
        if _debug():
            raise
        return int(failure.exit_code)
    except Exception as e:  # the last line of defence: one line, not a traceback
        if _is_sqlite_error(e):  # the store's index or hash cache: a full disk, most often
            ui.error(
                f"the store's database could not be used: {e}",
                "free space on the disk holding .repro/; `repro gc` removes incomplete runs",
            )
            return int(ExitCode.UNEXPECTED)
        ui.error(
            f"unexpected error: {type(e).__name__}: {e}", "set REPRO_DEBUG=1 for a traceback, and report it"
        )
        if _debug():
            raise
        return int(ExitCode.UNEXPECTED)
    return code if isinstance(code, int) else int(ExitCode.OK)


def _is_sqlite_error(e: Exception) -> bool:
    """Whether ``e`` is SQLite's: none can be unless a command imported sqlite3 (`--help` never does)."""
    sqlite3 = sys.modules.get("sqlite3")
    return sqlite3 is not None and isinstance(e, sqlite3.Error)


def _debug() -> bool:
    import os

    return bool(os.environ.get("REPRO_DEBUG"))


def run() -> None:
    sys.exit(main())
