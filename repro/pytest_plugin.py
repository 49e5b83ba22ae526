"""pytest plugin: reproducibility checks as a fixture."""

from __future__ import annotations
