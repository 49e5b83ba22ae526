"""-q/--quiet and -v/--verbose, which the group and every command take (`repro -q run …`, `repro run -q …`).

Kept apart from cli/options.py so that the group itself imports nothing of the core.
"""

from __future__ import annotations

import click

from repro import ui

QUIET_HELP = (
    "Only results, warnings and errors from repro: no progress or notices (the command's own output "
    "still shows)."
)
VERBOSE_HELP = "Also show every raw line of image builds and lock compiles (always kept in a log file)."


def _verbosity(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """-q / -v, given before or after the subcommand; the two together are a usage error."""
    if not value:
        return
    if param.name == "quiet":
        ui.quiet = True
    else:
        ui.verbose = True
    if ui.quiet and ui.verbose:
        raise click.UsageError("-q/--quiet and -v/--verbose contradict each other; give one", ctx=ctx)


def verbosity_options() -> list[click.Option]:
    """-q/--quiet and -v/--verbose, as every command takes them (`repro -q run …` or `repro run -q …`)."""
    return [
        click.Option(flags, is_flag=True, expose_value=False, callback=_verbosity, help=text)
        for flags, text in ((["-q", "--quiet"], QUIET_HELP), (["-v", "--verbose"], VERBOSE_HELP))
    ]
