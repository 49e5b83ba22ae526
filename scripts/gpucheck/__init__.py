"""`scripts/gpu-check`: every GPU claim of the README run on this machine's GPUs, in one call.

Standard library only at import (the GPU machine has its own Python and torch, none of repro's dev
dependencies): ``report`` writes REPORT.md and report.json and computes the bootstrap interval,
``harness`` runs repro in throw-away projects, ``checks`` holds one function per tagged claim and
``main`` ties them together under one time budget.
"""
