"""`%load_ext repro` in IPython/Jupyter: the `%%repro` cell magic records the cell as a run.

    %%repro --data data --outputs outputs --seed 42
    model = train()
    torch.save(model.state_dict(), "outputs/model.pt")

The code recorded is the project's (git state or snapshot) plus every cell executed so far in
the session and this one, in order. The run is captured in-process (`repro.capture`), with
what that cannot promise said in the record.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any, cast

from IPython.core.magic import Magics, cell_magic, magics_class

from repro import ui
from repro.errors import UsageError
from repro.inprocess import capture
from repro.units import plural


def executed_cells(history: list[str], body: str) -> str:
    """The session's cells before this one, as typed (IPython's raw input history), then its body."""
    earlier = [c for c in history[1:] if c.strip()]
    if earlier and earlier[-1].lstrip().startswith("%%repro"):
        earlier = earlier[:-1]  # IPython lists the running cell too
    parts = [f"# In[{n}]:\n{cell.rstrip()}\n" for n, cell in enumerate(earlier, 1)]
    parts.append(f"# In[{len(earlier) + 1}] (recorded by %%repro):\n{body.rstrip()}\n")
    return "\n".join(parts)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # a bad line is a usage error, not SystemExit in a kernel
        raise UsageError(f"%%repro: {message}", hint=self.format_usage().strip())


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="%%repro", add_help=False)
    parser.add_argument("--data", action="append", default=[], metavar="PATH")
    parser.add_argument("--outputs", action="append", default=[], metavar="DIR")
    parser.add_argument("--seed", type=int, default=None)
    return parser


@magics_class
class ReproMagics(Magics):
    @cell_magic
    def repro(self, line: str, cell: str) -> None:
        """Run the cell and record it as a repro run (code: the session's cells; data; outputs; metrics).

        %%repro [--data PATH]... [--outputs DIR]... [--seed N]
        """
        args = _parser().parse_args(shlex.split(line))
        shell = cast(Any, self.shell)  # IPython's shell is untyped
        cells = executed_cells(list(shell.history_manager.input_hist_raw), cell)
        with capture(data=args.data, outputs=args.outputs, seed=args.seed, cells=cells) as run:
            shell.ex(cell)
        record = run.record
        outputs = plural(len(record.results.outputs), "output")
        seed = record.seeds.master
        ui.info(f"run {record.id} {record.results.status} · {outputs} · captured in-process, seed {seed}")


def register(ipython: Any) -> None:
    """Add the magics to a running IPython shell."""
    ipython.register_magics(ReproMagics)
