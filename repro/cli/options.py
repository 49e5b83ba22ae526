"""Options shared by several commands, each defined once (as pip-tools keeps them in scripts/options.py)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from repro import ranges
from repro.errors import UsageError
from repro.runtime import contract

if TYPE_CHECKING:  # the core is imported where an option needs it, so `repro ls` does not pay for it
    from repro.backends import registry
    from repro.backends.flags import Flag, FlagSection, Given
    from repro.config import Plan
    from repro.store import signing

F = TypeVar("F", bound=Callable[..., Any])


class GpuRequest(click.ParamType[str]):
    """`--gpus`: ``all``, a count N ≥ 1, or comma-separated device ids (``0,1``, ``GPU-3f…``)."""

    name = "all|N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """The value as given, device ids without spaces (``0, 1`` → ``0,1``).

        Raises:
            UsageError: not what --gpus takes (the rule is `repro.ranges.gpus_problem`; exit 2).
        """
        text = ",".join(part.strip() for part in str(value).strip().split(","))
        why = ranges.gpus_problem(text)
        if why is not None:
            raise UsageError(f"--gpus {why}", hint="--gpus all, --gpus 2 or --gpus 0,1")
        return text


def gpus_option(help_text: str) -> Callable[[F], F]:
    """`--gpus all|N`, the same for `run`, `check` and `build`; given alone it means all."""
    return click.option(
        "--gpus",
        type=GpuRequest(),
        default=None,
        is_flag=False,
        flag_value="all",
        metavar="all|N",
        help=help_text,
    )


cuda_index = click.option(
    "--cuda-index",
    default=None,
    metavar="URL|none",
    help="Package index of torch's CUDA wheels for the cuda lock and CUDA images (cuda.index; "
    "default https://download.pytorch.org/whl/cu128; none: only the host's pip configuration). "
    "Also REPRO_CUDA_INDEX.",
)


class BackendChoice(click.Choice):  # type: ignore[type-arg]
    """The names `repro.backends.registry` holds when the command line is read (a backend registered
    after import is a choice too)."""

    def __init__(self) -> None:
        super().__init__(())  # the registry is read when a choice is (`choices`), not at import

    @property
    def choices(self) -> tuple[str, ...]:
        from repro.backends import registry

        return registry.names()

    @choices.setter
    def choices(self, value: object) -> None:
        pass


def backend_option(help_text: str) -> Callable[[F], F]:
    """`--backend`, the same choices in `run`, `check`, `replay` and `resume` (the backend registry's,
    with auto); ``help_text`` says what the choice means for the command."""
    return click.option("--backend", type=BackendChoice(), default=None, help=help_text)


def json_option(help_text: str) -> Callable[[F], F]:
    """`--json`, as every command that answers with a document takes it (into ``as_json``)."""
    return click.option("--json", "as_json", is_flag=True, help=help_text)


# The execution options of `run` and `check`, in the order `--help` lists them.
_OPS: list[Callable[[Any], Any]] = [
    click.option(
        "--ops/--no-ops",
        default=None,
        help="Fingerprint every tensor op's output and inputs over the first optimizer steps, so a "
        "divergence names its first differing op: aten op, module, file:line, forward/backward, step, "
        "rank, and whether its inputs were identical (replay: re-executes the original for it when "
        "its record has none).",
    ),
    click.option(
        "--ops-steps",
        type=click.IntRange(ranges.STEPS.low, ranges.STEPS.high),
        default=None,
        metavar="K",
        help=f"Optimizer steps --ops covers (default {contract.DEFAULT_OPS_STEPS}; a replay stops at "
        "the first step the trace finds different).",
    ),
]


_EXECUTION_HEAD: list[Callable[[Any], Any]] = [
    backend_option("Where to execute (auto: docker if an engine answers, else rootless podman, else local)."),
    click.option(
        "--seed",
        type=int,
        default=None,
        help="Master seed, 0..4294967295 (default: drawn and recorded).",
    ),
    click.option(
        "--mode",
        type=click.Choice(contract.MODES),
        default=None,
        help="Determinism: strict (CPU, bit-for-bit; default), gpu (near-exact), off.",
    ),
    click.option(
        "--data",
        "data",
        multiple=True,
        metavar="PATH",
        help="Declared input data (repeatable; relative to the current directory); hashed and "
        "checked on replay.",
    ),
    click.option(
        "--outputs",
        "outputs",
        multiple=True,
        metavar="DIR",
        help="Output directory (repeatable; relative to the current directory; default: outputs "
        "at the project root).",
    ),
    click.option(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="Intra-op CPU threads in strict/gpu mode (default: the CPUs the run may use, its "
        "affinity mask capped by its cgroup CPU quota, shared by its ranks; 1 on Slurm). Recorded; "
        "a replay runs with the recorded N, on fewer CPUs too. Runs at other N may differ in bits "
        "(see README: Threads).",
    ),
]


def _isa_option() -> Callable[[Any], Any]:
    """`--isa` (its choices are the settings', imported when a command that has it is defined)."""
    from repro.config import ISAS

    return click.option(
        "--isa",
        type=click.Choice(ISAS),
        default=None,
        help="CPU kernel ISA pin for strict replay across hosts (auto: avx2 when present; "
        "portable: MKL's compatible branch, pins meant for Intel and AMD alike; README: CPU ISA pins).",
    )


_EXECUTION_TAIL: list[Callable[[Any], Any]] = [
    click.option(
        "--nproc-per-node",
        type=click.IntRange(1),
        default=None,
        help="Launch N processes through torchrun --standalone (N=1 too: one rank under torchrun; "
        "default: the command as given).",
    ),
    gpus_option(
        "GPUs to give the run: all, a count N or device ids (0,1); --gpus alone: all. "
        "Exit 3 when this machine has fewer."
    ),  # fmt: skip
    cuda_index,
    click.option(
        "--network/--no-network",
        default=None,
        help="Allow network access inside the container (default: none; recorded).",
    ),
    click.option(
        "--trace/--no-trace",
        default=None,
        help="Record each parameter's fingerprint after every optimizer step, so a replay "
        "names the first step and parameter that diverged.",
    ),
    *_OPS,
    click.option(
        "--allow-nondeterministic-ops/--no-allow-nondeterministic-ops",
        default=None,
        help="strict/gpu: an op without a deterministic kernel warns instead of failing the run; "
        "every such op is counted in the record (a replay then cannot promise identical).",
    ),
]


def execution_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add the shared execution options; the command receives them as `flags: Flags`."""
    from repro.config import Flags

    fields = tuple(name for name in Flags.__dataclass_fields__ if name != "compare_stdout")

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["flags"] = Flags(**{name: kwargs.pop(name) for name in fields})
        return f(*args, **kwargs)

    for option in reversed([*_EXECUTION_HEAD, _isa_option(), *_EXECUTION_TAIL]):
        wrapper = option(wrapper)
    return wrapper


replay_backend = backend_option(
    "Execute on this backend instead of the recorded one (also REPRO_BACKEND; reported in the verdict). "
    "A capsule file (or a run imported from one) replays in the docker sandbox whatever it names; "
    "local or slurm here runs its code on this machine, unsandboxed."
)
replay_env = click.option(
    "--env",
    "env",
    multiple=True,
    metavar="NAME",
    help="Also set this recorded environment variable again (repeatable); by default only the safe set "
    "(TORCH_*, OMP_*, NCCL_* … with plain values) is. Never LD_*, PYTHON*, proxies and the like.",
)
data_root = click.option(
    "--data-root",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="Directory the recorded data paths are relative to (default: the project root). Data of a "
    "run from elsewhere that differs from its record is shown to the replay only from a directory "
    "named here.",
)
allow_data_drift = click.option(
    "--allow-data-drift",
    is_flag=True,
    help="Go on even when the data differs from the record (for a run from elsewhere, the differing "
    "data comes only from --data-root; never .git, .repro or a credential file).",
)
atol = click.option(
    "--atol",
    type=click.FloatRange(min=0.0),
    default=None,
    help="Absolute tolerance for gpu/off modes (defaults: gpu 1e-6, off 1e-4; strict is exact).",
)
rtol = click.option(
    "--rtol",
    type=click.FloatRange(min=0.0),
    default=None,
    help="Relative tolerance for gpu/off modes (defaults: gpu 1e-5, off 1e-3).",
)


compare_stdout = click.option(
    "--compare-stdout/--no-compare-stdout",
    default=None,
    help="Whether stdout counts in the verdict (default: yes, timings masked; also compare.stdout "
    "in repro.yaml, REPRO_COMPARE_STDOUT).",
)


def byte_size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """A size option's bytes: ``2147483648``, ``500MiB``, ``2GiB``."""
    if value is None:
        return None
    from repro.store.limits import parse_size

    size = parse_size(value)
    if size is None:
        raise click.BadParameter(f"{value!r} is not a size (bytes, or 500MiB, 2GiB)")
    return size


max_data_size = click.option(
    "--max-data-size", default=None, metavar="SIZE", callback=byte_size,
    help="The most declared data carried in a capsule or placed from it (bytes, 500MiB, 4GiB; default 2GiB).",
)  # fmt: skip

# push and export: what a shared run carries, and how it is vouched for (each defined once)
with_data = click.option("--with-data", is_flag=True,
    help="Carry the run's declared data too, as content-addressed blobs checked on arrival: it replays "
    "where the data is absent or differs.")  # fmt: skip
allow_secrets_in_outputs = click.option("--allow-secrets-in-outputs", is_flag=True,
    help="Share the run even when its outputs hold a credential (a token in a saved config or in "
    "pickled training arguments); refused by default, naming the files.")  # fmt: skip
attest = click.option("--attest", is_flag=True,
    help="Carry the run's attestation, signed with the --sign key: --format intoto its SLSA provenance "
    "(`repro verify-attestation`), --format oms an OpenSSF Model Signing signature of its model files "
    "(`model_signing verify`).")  # fmt: skip
attest_format = click.option("--format", "attest_format", type=click.Choice(["intoto", "oms"]),
    default="intoto", show_default=True,
    help="intoto: an in-toto SLSA provenance statement in a DSSE envelope (Ed25519 or ECDSA P-256 key); "
    "oms: an OpenSSF Model Signing v1 bundle over the model files (ECDSA P-256 key).")  # fmt: skip
sign = click.option("--sign", "sign_path", type=click.Path(path_type=Path), default=None, metavar="KEYFILE",
    envvar="REPRO_SIGNING_KEY", show_envvar=True,
    help="The private key file that signs (from `repro keygen`): a capsule's SIGNATURE over "
    "SHA256SUMS (export; an HMAC key too) and the --attest statement (Ed25519, or ECDSA P-256 for "
    "--format oms).")  # fmt: skip


def require_attest_for_format(attest: bool, attest_format: str) -> None:
    """Raises: UsageError: --format oms without --attest (it says what --attest carries)."""
    if attest_format != "intoto" and not attest:
        raise UsageError(f"--format {attest_format} says what --attest carries", hint="add --attest")


def ops_options(f: F) -> F:
    """``--ops`` and ``--ops-steps K`` for replay (run and check have them among the execution options)."""
    for option in reversed(_OPS):
        f = option(f)
    return f


def replay_options(f: F) -> F:
    """The options of a replay: --data-root, --allow-data-drift, --atol, --rtol, --[no-]compare-stdout,
    --env (replay, check)."""
    for option in (replay_env, compare_stdout, rtol, atol, allow_data_drift, data_root):
        f = option(f)
    return f


@dataclass(frozen=True)
class BackendFlags:
    """The backends' flags a command line gave: backend → (`Flag.key` → value), the flags given only."""

    given: Mapping[str, Given]

    def over(self, plan: Plan) -> Plan:
        """The plan with the flags that set a setting on top (they win over the backend's repro.yaml section).

        Raises:
            UsageError: a backend's flags given where the plan's backend is another.
        """
        from repro.backends import registry
        from repro.config import Layer, Rank

        for name, given in self.given.items():
            if not given:
                continue
            entry = registry.get(name)
            section = _section(entry)
            if plan.settings.backend != name:
                flags = [flag.label for flag in section.flags if flag.key in given]
                raise UsageError(
                    f"{', '.join(flags)} only appl{'ies' if len(flags) == 1 else 'y'} to --backend {name}",
                    hint=f"add --backend {name} (or `backend: {name}` in repro.yaml)",
                )
            fields = entry.settings()
            settings = {
                fields[f"{entry.section}.{flag.setting}"]: (given[flag.key], flag.label)
                for flag in section.flags
                if flag.setting is not None and flag.key in given
            }
            if settings:
                plan = plan.over(Layer(Rank.FLAG, settings))
        return plan

    def options(self, backend: str, options: object) -> object:
        """Backend ``backend``'s options (from the settings) with its this-run-only flags given on top."""
        from repro.backends import registry

        section = _section(registry.find(backend))
        run_only = section.run_only(self.given.get(backend, {}))
        return section.options(options, run_only) if run_only else options

    @property
    def detach(self) -> bool:
        """Whether a backend's switch asks to submit the run and return at once (`repro ls` seals it)."""
        from repro.backends import registry

        return any(_section(registry.get(name)).detach in given for name, given in self.given.items())


def _section(entry: registry.Entry | None) -> FlagSection:
    from repro.backends.flags import FlagSection

    return entry.flags if entry is not None and entry.flags is not None else FlagSection("", ())


class SectionOption(click.Option):
    """An option listed under a heading of its own in `--help` (see `SectionedCommand`)."""

    def __init__(self, *args: Any, section: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.section = section


class SectionedCommand(click.Command):
    """A command whose `--help` lists the options of each `SectionOption` section under its own
    heading, after the command's main options."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        sections: dict[str, list[tuple[str, str]]] = {"Options": []}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None or isinstance(param, click.Argument):
                continue
            heading = param.section if isinstance(param, SectionOption) else "Options"
            sections.setdefault(heading, []).append(record)
        for heading, records in sections.items():
            if records:
                with formatter.section(heading):
                    formatter.write_dl(records)


def _dest(backend: str, flag: Flag) -> str:
    """The keyword a backend's flag reaches the command under (unique across backends)."""
    return re.sub(r"\W", "_", f"{backend}_{flag.key}")


def _backend_flag(backend: str, title: str, flag: Flag) -> Callable[[F], F]:
    """A backend's flag (`repro.backends.flags.Flag`) as a click option, listed under ``title``."""
    attrs: dict[str, Any] = {"default": None, "help": flag.help}
    if flag.takes == "count":
        attrs["type"] = click.IntRange(1)
    elif flag.takes == "switch":
        attrs.update(is_flag=True, default=False)
    elif flag.choices:
        attrs["type"] = click.Choice(flag.choices)
    if flag.metavar is not None:
        attrs["metavar"] = flag.metavar
    if flag.repeat:
        attrs.update(multiple=True, default=())
    return click.option(flag.name, _dest(backend, flag), cls=SectionOption, section=title, **attrs)


def backend_flags(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add the flags of every backend registered when the command is built, each backend's under its
    own heading in `--help` (`SectionedCommand`); the command receives them as `backend_flags:
    BackendFlags`."""
    from repro.backends import registry

    declared = [(entry.name, entry.flags) for entry in registry.ENTRIES if entry.flags is not None]

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given: dict[str, Given] = {}
        for name, section in declared:
            values = {flag: kwargs.pop(_dest(name, flag)) for flag in section.flags}
            given[name] = {flag.key: value for flag, value in values.items() if flag.given(value)}
        kwargs["backend_flags"] = BackendFlags(given)
        return f(*args, **kwargs)

    for name, section in reversed(declared):
        for flag in reversed(section.flags):
            wrapper = _backend_flag(name, section.title, flag)(wrapper)
    return wrapper


STDOUT = "-"


def markdown_option(what: str) -> Callable[[F], F]:
    """`--markdown FILE`, the same in `diff`, `check` and `replay`: ``what`` as Markdown written to
    FILE; `-`, or the option alone, prints it on stdout in place of the text."""
    return click.option(
        "--markdown",
        type=click.Path(dir_okay=False, allow_dash=True),
        default=None,
        is_flag=False,
        flag_value=STDOUT,
        metavar="FILE",
        help=f"Write {what} as Markdown to FILE (for a PR comment or $GITHUB_STEP_SUMMARY); "
        "`-` or --markdown alone: on stdout, in place of the text.",
    )


def output_forms(as_json: bool, markdown: str | None) -> None:
    """Refuse two documents on stdout at once: --json with `--markdown -`.

    Raises:
        UsageError: both were asked for.
    """
    if as_json and markdown == STDOUT:
        raise UsageError(
            "--json and --markdown - both print on stdout",
            hint="write the Markdown to a file: --markdown FILE",
        )


def trust_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add --key and --require-signed (verify, replay, check --against); the command receives
    `trust: Trust | None` (None when neither is given), the key file already read.

    Raises:
        UsageError: --require-signed without --key; a missing, unreadable or wrong-size key file.
    """

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        key_path, require = kwargs.pop("key_path"), kwargs.pop("require_signed")
        kwargs["trust"] = trust(key_path, require)
        return f(*args, **kwargs)

    wrapper = click.option(
        "--require-signed", is_flag=True,
        help="Fail (exit 6) unless the capsule is signed with the --key given.",
    )(wrapper)  # fmt: skip
    return click.option(
        "--key", "key_path", type=click.Path(path_type=Path), default=None, metavar="KEYFILE",
        help="Check the capsule's signature with this key file (from `repro keygen`: the shared HMAC key, "
        "or an Ed25519 public key PATH.pub): exit 6 when it was changed after signing or signed with "
        "another key.",
    )(wrapper)  # fmt: skip


def trust(key_path: Path | None, require: bool) -> signing.Trust | None:
    """What --key and --require-signed ask of a capsule.

    Raises:
        UsageError: --require-signed without --key; a bad key file.
    """
    if require and key_path is None:
        raise UsageError(
            "--require-signed needs --key KEYFILE: without the key a signature proves nothing",
            hint="add --key with the key the capsule was signed with",
        )
    if key_path is None:
        return None
    from repro.store import signing

    return signing.Trust(signing.load_key(key_path), require)


def _plot_format(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """Refuse a plot file of another format before anything runs."""
    if value is not None and value.suffix.lower() not in (".png", ".svg"):
        raise UsageError(
            f"--plot writes PNG or SVG, not {value.suffix or 'a file without a suffix'}",
            hint=f"name the file {value.stem or 'curves'}.png or {value.stem or 'curves'}.svg",
        )
    return value


def plot_option(what: str) -> Callable[[F], F]:
    """`--plot FILE`, the same in `diff`, `check` and `replay`: ``what``'s metric curves drawn."""
    return click.option(
        "--plot",
        "plot_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        callback=_plot_format,
        metavar="FILE",
        help=f"Draw {what} metric curves to FILE (.png or .svg; needs matplotlib): one panel per metric, "
        "the first divergence marked.",
    )


def html_option(what: str) -> Callable[[F], F]:
    """`--html FILE`, the same in `diff`, `check` and `replay`: one self-contained HTML page."""
    return click.option(
        "--html",
        "html_path",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        metavar="FILE",
        help=f"Write {what} as one self-contained HTML page (curves, causes, outputs; no external assets), "
        "for a CI artifact.",
    )
