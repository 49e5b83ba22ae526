"""Masking of what a run stores: known secret values and credential shapes become ``***``.

A `Masker` is built once per run from the environment, the command line and the config files it
names (`files.run_masker`), and applied to everything the run stores: logs, params, metrics,
the uncommitted patch, config copies and code files.
"""

from __future__ import annotations

import re
from typing import Any

from repro.facts.secrets.redact import Redactor
from repro.facts.secrets.rules import (
    MIN_SECRET,
    REDACTED,
    NameVerdict,
    hides_value,
    mask_shapes,
    mask_shapes_bytes,
    secret_parts,
)


class Masker:
    """Replaces known secret values (longest first) and credential-shaped text with ``***``.

    ``where`` names what is being masked (`the logs`, `config file conf.yaml`): every place where
    something was masked is kept in ``masked`` for the record.
    """

    def __init__(
        self, values: set[str] | frozenset[str] = frozenset(), redactor: Redactor | None = None
    ) -> None:
        self.values = sorted({v for v in values if len(v) >= MIN_SECRET}, key=len, reverse=True)
        self.redactor = redactor or Redactor()
        self._text = re.compile("|".join(re.escape(v) for v in self.values)) if self.values else None
        self._encoded = [v.encode("utf-8", "surrogateescape") for v in self.values]
        self.masked: set[str] = set()

    def add(self, values: set[str]) -> Masker:
        """A masker for these values too (same name rules, same record of where it masked)."""
        more = Masker(set(self.values) | values, self.redactor)
        more.masked = self.masked
        return more

    def learn(self, raw: bytes) -> set[str]:
        """Add the secret values printed text holds (credential shapes, `api_key: x` assignments) to
        the values this masker hides everywhere; returns the new ones. A value found in a log is then
        masked in every other place the run keeps it, without the context that gave it away."""
        if mask_shapes_bytes(raw, assignments=True) == raw:
            return set()  # the common case: one fast pass, nothing to learn
        parts = secret_parts(raw.decode("utf-8", "replace"), assignments=True)
        found = {v for v in parts if len(v) >= MIN_SECRET}
        new = found - set(self.values)
        if new:
            self.values = sorted({*self.values, *new}, key=len, reverse=True)
            self._text = re.compile("|".join(re.escape(v) for v in self.values))
            self._encoded = [v.encode("utf-8", "surrogateescape") for v in self.values]
        return new

    def holds_known(self, raw: bytes) -> bool:
        """Whether the bytes hold a known value of at least `KNOWN_MIN` characters."""
        return any(v in raw for v in self._encoded if len(v) >= KNOWN_MIN)

    def known(self, value: Any) -> Any:
        """Every string in nested data with the known values masked (no name rule, no shape): the
        last pass over a record, once every value judged secret anywhere is known. What names
        content (a file entry: path and digest; a digest, id or commit) stays as it is, and so does
        a value shorter than `KNOWN_MIN` (a four-letter password must not break a path or digest)."""
        long = [v for v in self.values if len(v) >= KNOWN_MIN]
        if not long:
            return value
        return _known(value, re.compile("|".join(re.escape(v) for v in long)))

    def text(self, value: str, where: str = "", printed: bool = True) -> str:
        """``printed``: text a program printed (also `api_key: x` assignments), not code."""
        out = self._text.sub(REDACTED, value) if self._text is not None else value
        out, _ = mask_shapes(out, assignments=printed)
        if out != value and where:
            self.masked.add(where)
        return out

    def data(self, raw: bytes, where: str = "", printed: bool = True, shapes: bool = True) -> bytes:
        """`text` over bytes: logs, metric files, config copies, code files (``printed=False``).

        ``shapes=False``: the known values only (a code file already found free of shapes).
        """
        out = raw
        present = [v for v in self._encoded if v in raw]  # a substring search per value is fast
        if present:
            out = re.compile(b"|".join(re.escape(v) for v in present)).sub(REDACTED.encode(), out)
        if shapes:
            out = mask_shapes_bytes(out, assignments=printed)
        if out != raw and where:
            self.masked.add(where)
        return out

    def obj(self, value: Any, where: str = "", key: str = "") -> Any:
        """Every string in nested data masked (keys too); a value under a credential name hidden
        whole, and everything below one (`credentials: [...]`, `auth: {user: …, pass: …}`); a value
        under an ambiguous name hidden when it looks like a credential."""
        return self._walk(value, where, self.redactor.classify(key) if key else "plain")

    def _walk(self, value: Any, where: str, verdict: NameVerdict) -> Any:
        if hides_value(verdict, value):
            if where:
                self.masked.add(where)
            return REDACTED
        if isinstance(value, str):
            return self.text(value, where)
        if isinstance(value, dict):
            return {
                self.text(str(k), where): self._walk(
                    v, where, _below(verdict, self.redactor.classify(str(k)))
                )
                for k, v in value.items()
            }
        if isinstance(value, (list, tuple)):
            return [self._walk(v, where, verdict) for v in value]
        return value


KNOWN_MIN = 8
_NAMES_CONTENT = frozenset({"hash", "id", "commit", "patch", "digest", "sha256", "image_id"})


def _known(value: Any, pattern: re.Pattern[str]) -> Any:
    if isinstance(value, str):
        return pattern.sub(REDACTED, value)
    if isinstance(value, dict):
        if "hash" in value and "path" in value:
            return value  # a file entry: its path restores the file, its digest names it
        return {
            k: v if k in _NAMES_CONTENT else _known(v, pattern)
            for k, v in ((_known(k, pattern), v) for k, v in value.items())
        }
    if isinstance(value, list):
        return [_known(v, pattern) for v in value]
    return value


def _below(parent: NameVerdict, child: NameVerdict) -> NameVerdict:
    return "secret" if parent == "secret" else child
