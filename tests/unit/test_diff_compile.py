"""`repro diff` names a change of compiler, torch or Inductor setting, and compiled against eager."""

from __future__ import annotations

from repro.diff import diff_records
from tests.builders import Blobs, make_record, other_results, same_as

INDUCTOR: dict[str, object] = {
    "compiled": True,
    "inductor.deterministic": True,
    "inductor.max_autotune": False,
}


def _reasons(
    a_knobs: dict[str, object], b_knobs: dict[str, object], a_cc: str | None, b_cc: str | None
) -> str:
    blobs = Blobs()
    a = make_record(blobs, "a")
    a.determinism.knobs.update(a_knobs)
    a.env.compiler = a_cc
    b = same_as(a, "b")
    b.determinism.knobs = {**{k: v for k, v in b.determinism.knobs.items() if k not in a_knobs}, **b_knobs}
    b.env.compiler = b_cc
    result = diff_records(a, other_results(b), blobs)
    return " | ".join(c.reason for c in result.likely_causes)


def test_compiled_against_eager_names_the_compile_and_the_compiler() -> None:
    reasons = _reasons(INDUCTOR, {}, "g++ 12.2.0", None)
    assert "compiled" in reasons and "compiler" in reasons


def test_another_compiler_is_named() -> None:
    assert "compiler" in _reasons(INDUCTOR, INDUCTOR, "g++ 12.2.0", "g++ 13.3.0")


def test_another_inductor_setting_is_named() -> None:
    reasons = _reasons(INDUCTOR, {**INDUCTOR, "inductor.max_autotune": True}, "g++ 12.2.0", "g++ 12.2.0")
    assert "inductor.max_autotune" in reasons
