"""The variables the user set for a command, passed to it on every backend and set again by a replay.

``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 repro run train.py``: the record keeps the variables of an
allow-list (`repro.facts.env.ENV_ALLOW` and `env.allow` in repro.yaml), secrets redacted. A run
passes them to its command (the local backend inherits the whole shell anyway; a container or a
Slurm job gets them from here), and a replay or a resume sets them again from the record — by one
rule, because a record may come from someone else:

- **by default**, names of the safe set (`SAFE`: thread, kernel and library switches such as
  ``TORCH_*``, ``OMP_*``, ``NCCL_*``), not a name that takes a place (`PLACE_NAMES`:
  ``NCCL_CONF_FILE``, ``TORCH_HOME``, ``NCCL_COMM_ID``), with a short value that names no path,
  parent folder or host (``..``, ``/``, ``host:port``, ``example.com``, an address);
- **on request**, the names given with ``--env NAME`` (and those `env.allow` lists), with any
  printable value up to `MAX_VALUE` characters; the recording machine's locale and time zone
  (`MACHINE`: ``LANG``, ``LC_*``, ``TZ``) only so;
- **never** a name of `NEVER` (what loads code or routes traffic and credentials: ``LD_*``,
  ``*_PRELOAD``, ``PYTHON*``, ``BASH_ENV``, proxies, …), a redacted value, or a value with a
  control character — whatever flag is given.

repro's own variables (mode, seeds, the runtime's) are set after these and always win. Core only:
returns data (`Passed`), whose notes the caller prints.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from repro.errors import UsageError
from repro.facts.secrets import REDACTED

MAX_VALUE = 4096
_MAX_DEFAULT_VALUE = 256

SAFE = (
    "TORCH_*", "PYTORCH_*", "OMP_*", "MKL_*", "OPENBLAS_*", "NUMEXPR_*", "KMP_*", "GOMP_*", "CUBLAS_*",
    "CUDNN_*", "NCCL_*", "ATEN_*", "ONEDNN_*", "DNNL_*", "CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_ORDER",
    "CUDA_MODULE_LOADING", "NVIDIA_TF32_OVERRIDE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE",
    "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM",
)  # fmt: skip

# The recording machine's locale and time zone: recorded as facts about it, like its hostname, and
# left to the replaying machine unless `--env NAME` asks (not even named in a note).
MACHINE = ("LANG", "LANGUAGE", "LC_*", "TZ")

NEVER = (
    # the dynamic loader, the interpreter and the shells: each can run or load code
    "LD_*", "DYLD_*", "*_PRELOAD", "GLIBC_TUNABLES", "MALLOC_*", "GCONV_PATH", "LOCPATH", "NLSPATH",
    "PYTHON*", "BASH_ENV", "ENV", "BASH_FUNC_*", "SHELLOPTS", "BASHOPTS", "PS4", "IFS", "PATH", "HOME",
    "SHELL", "TMPDIR", "OMP_TOOL*", "CUDA_INJECTION*", "*_PLUGIN", "*_PLUGIN_*",
    # where traffic and credentials go
    "*_PROXY", "*_proxy", "SSL_CERT_*", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "HOSTALIASES", "RES_OPTIONS",
    "GIT_*", "SSH_*", "PIP_*", "DOCKER_*", "KUBECONFIG", "AWS_*", "GOOGLE_*", "AZURE_*", "MLFLOW_*",
    "WANDB_BASE_URL", "HF_ENDPOINT",
    # what repro, Slurm and the container runtime decide themselves
    "REPRO_*", "SLURM_*", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
)  # fmt: skip

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9_.,:;=+ %-]*")  # no path, address or shell syntax
# Names of the safe set's families that take a file, a folder or a host, never a switch: such a
# variable is set again only on request (`NCCL_CONF_FILE`, `TORCH_HOME`, `NCCL_COMM_ID`, …).
PLACE_NAMES = (
    "*_FILE", "*_FILES", "*_PATH", "*_DIR", "*_DIRS", "*_HOME", "*_ROOT", "*_CACHE*", "*_LIBRARY*",
    "*_LIBRARIES", "*_SOCKET*", "*_HOST*", "*_ADDR*", "*_PORT*", "*_URL", "*_URI", "*_ENDPOINT*",
    "*_STORE*", "*_COMM_ID", "*_IFNAME",
)  # fmt: skip
# A value that names a place: a parent folder, a host (a dotted name, an address, `host:port`), or
# `localhost`. Host names hold no `_`, so `max_split_size_mb:128` is a switch, `node1:29500` a host.
_PLACE_VALUE = re.compile(
    r"\.\.|(?:^|[,;= ])(?:localhost\b|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z][A-Za-z0-9-]*\b"
    r"|\d{1,3}(?:\.\d{1,3}){3}\b|[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9-]+)*:\d{1,5}\b)"
)


@dataclass
class Passed:
    """What a command gets of a set of recorded variables, and what it does not, by name."""

    env: dict[str, str] = field(default_factory=dict)  # set for the command
    refused: list[str] = field(default_factory=list)  # never from a record (NEVER, a bad name or value)
    held: list[str] = field(default_factory=list)  # outside the safe set, or a path: `--env NAME` sets one
    redacted: list[str] = field(default_factory=list)  # recorded as ***: nothing to set

    def notes(self, here: Mapping[str, str] | None = None) -> list[str]:
        """One line for each group, for a replay to print (empty groups say nothing). A variable
        that ``here`` (the replaying side's environment) already holds with the same value changes
        nothing and is not named."""
        found = []
        changed = {k: v for k, v in self.env.items() if here is None or here.get(k) != v}
        if changed:
            shown = [f"{k}={_shown(v)}" for k, v in sorted(changed.items())]
            found.append(f"recorded environment variables set again: {_listed(shown)}")
        if self.refused:
            found.append(
                "recorded environment variables that repro never sets from a record were dropped: "
                + _listed(self.refused)
            )
        if self.held:
            found.append(
                f"recorded environment variables not set again (outside the safe set): {_listed(self.held)}"
                " — `--env NAME` sets one"
            )
        if self.redacted:
            found.append(
                f"recorded environment variables with redacted values, not set: {_listed(self.redacted)}"
            )
        return found


def never(name: str) -> bool:
    """Whether ``name`` is one a record never sets (`NEVER`), whatever flag is given."""
    return not _NAME.fullmatch(name) or any(fnmatch.fnmatchcase(name, p) for p in NEVER)


def select(variables: Mapping[str, object], asked: Iterable[str] = (), allowed: Iterable[str] = ()) -> Passed:
    """Split recorded ``variables`` into what the command gets and what it does not.

    ``asked``: names given with ``--env`` (exact); ``allowed``: patterns the replaying side's
    `env.allow` lists. Both widen the safe set to any printable value; neither lifts `NEVER`.
    """
    asked, allowed = set(asked), tuple(allowed)
    passed = Passed()
    for name, value in sorted(variables.items(), key=lambda item: str(item[0])):
        if not isinstance(name, str) or not isinstance(value, str) or never(name):
            passed.refused.append(_shown(name))
        elif REDACTED in value:
            passed.redacted.append(name)
        elif _CONTROL.search(value) or len(value) > MAX_VALUE:
            passed.refused.append(name)
        elif name in asked or any(fnmatch.fnmatchcase(name, p) for p in allowed):
            passed.env[name] = value
        elif _default(name, value):
            passed.env[name] = value
        elif not any(fnmatch.fnmatchcase(name, p) for p in MACHINE):
            passed.held.append(name)
    return passed


def check_asked(asked: Iterable[str]) -> None:
    """Refuse an ``--env NAME`` that no flag can make a record set.

    Raises:
        UsageError: a name of `NEVER`, or not a variable name.
    """
    for name in asked:
        if never(name):
            raise UsageError(
                f"--env {_shown(name)}: repro never sets this variable from a record",
                hint="set it for your own shell's commands instead; a replay takes only names outside "
                "README's never-list (LD_*, PYTHON*, proxies, …)",
            )


def unknown(asked: Iterable[str], variables: Mapping[str, object]) -> list[str]:
    """Names given with ``--env`` that the record does not hold."""
    return sorted(set(asked) - set(variables))


def _default(name: str, value: str) -> bool:
    return (
        any(fnmatch.fnmatchcase(name, p) for p in SAFE)
        and not any(fnmatch.fnmatchcase(name, p) for p in PLACE_NAMES)
        and len(value) <= _MAX_DEFAULT_VALUE
        and _PLAIN_VALUE.fullmatch(value) is not None
        and _PLACE_VALUE.search(value) is None
    )


def _shown(value: object, limit: int = 40) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = _CONTROL.sub("?", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _listed(names: list[str], limit: int = 8) -> str:
    more = f" (+{len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more
