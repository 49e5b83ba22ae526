"""Keep secrets out of records: by name, by shape, in files.

- `rules`: the one home of the rules (which names hold credentials, which text is one by its shape,
  which files are credentials);
- `redact`: the command line and environment variables as the record keeps them;
- `mask`: known values and shapes masked in everything a run stores;
- `files`: credential files under any name, and credential keys in config files.

The names below are imported from their module when first asked for, so a command that only reads
the verdicts of a run's outputs (`repro export`, through `outputs`) does not import the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from repro.facts.secrets.files import config_bytes_secrets, config_secrets, credential_in_file, run_masker
    from repro.facts.secrets.mask import Masker
    from repro.facts.secrets.redact import Redactor, redacted_options
    from repro.facts.secrets.rules import REDACTED, is_secret_file, mask_shapes

_HOMES = {
    "REDACTED": "rules",
    "Masker": "mask",
    "Redactor": "redact",
    "config_bytes_secrets": "files",
    "config_secrets": "files",
    "credential_in_file": "files",
    "is_secret_file": "rules",
    "mask_shapes": "rules",
    "redacted_options": "redact",
    "run_masker": "files",
}

__all__ = [
    "REDACTED",
    "Masker",
    "Redactor",
    "config_bytes_secrets",
    "config_secrets",
    "credential_in_file",
    "is_secret_file",
    "mask_shapes",
    "redacted_options",
    "run_masker",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
