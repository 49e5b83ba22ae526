"""Keep secrets out of records: by name, by shape, in files.

- `rules`: the one home of the rules (which names hold credentials, which text is one by its shape,
  which files are credentials);
- `redact`: the command line and environment variables as the record keeps them;
- `mask`: known values and shapes masked in everything a run stores;
- `files`: credential files under any name, and credential keys in config files.
"""

from __future__ import annotations

from repro.facts.secrets.files import config_bytes_secrets, config_secrets, credential_in_file, run_masker
from repro.facts.secrets.mask import Masker
from repro.facts.secrets.redact import Redactor, redacted_options
from repro.facts.secrets.rules import REDACTED, is_secret_file, mask_shapes

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
