"""`repro diff --prove`'s windowed experiments (`repro.prove.windowing`): the checkpoint both runs share
and the steps replayed after it, or why the experiments are whole runs; how the report says it; the
first differing op in a "changes the result" line; the proof on `repro check --html`'s page."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from repro import schemas
from repro.compare.reasons import Code, Reason
from repro.compare.verdict import Verdict
from repro.diff import diff_records
from repro.diff.proof import Experiment, Factor, Proof
from repro.prove import first_op
from repro.prove.search import search
from repro.prove.windowing import choose
from repro.store.record import CheckpointInfo, Record
from repro.ui import proof as proof_ui
from repro.ui import report as report_ui


def _trace(values: list[float]) -> list[dict[str, Any]]:
    return [{"step": i, "f": 2, "params": {"w": [v, abs(v)]}} for i, v in enumerate(values)]


def _run(name: str, steps: list[int], kept: bool = True) -> Record:
    r = Record(id=name, created="2026-01-01T00:00:00Z")
    r.results.checkpoints = [
        CheckpointInfo(path=f"ckpt/s{s}.pt", hash=f"h{s}", step=s, blob=f"b{s}" if kept else None)
        for s in steps
    ]
    return r


def test_the_window_starts_at_the_last_kept_checkpoint_before_the_runs_part() -> None:
    same = [float(i) for i in range(30)]
    other = same[:17] + [99.0] * 13  # part at optimizer step 17
    w = choose(_run("A", [0, 10, 15, 20]), _run("B", [10]), _trace(same), _trace(other), None)
    assert w.windowed and w.checkpoint is not None and w.checkpoint.step == 15 and w.diverged_at == 17
    assert w.steps == 17 - 15 + 1 + 3  # to the first divergence, plus 10% of 30 steps
    assert w.to_dict() == {"windowed": True, "checkpoint": "ckpt/s15.pt", "from_step": 15, "steps": 6,
                           "diverged_at": 17, "why_not": None}  # fmt: skip
    assert choose(_run("A", [10]), _run("B", [10]), _trace(same), _trace(other), 4).steps == 4  # --steps K
    short = choose(_run("A", [10]), _run("B", [10]), _trace(same[:12]), _trace(same[:11] + [5.0]), None)
    assert short.steps == 2  # the margin is at least 2, and the window ends with the run


def test_whole_runs_where_no_window_applies_and_why() -> None:
    same, other = _trace([1.0, 2.0, 3.0, 4.0]), _trace([1.0, 2.0, 3.5, 4.0])
    cases = {
        "not traced": choose(_run("A", [1]), _run("B", [1]), same, [], None),
        "saved no checkpoint": choose(_run("A", [1]), _run("B", []), same, other, None),
        "part at optimizer step 2, before any": choose(_run("A", [3]), _run("B", [3]), same, other, None),
        "whose bytes": choose(_run("A", [1], kept=False), _run("B", [1]), same, other, None),
    }  # fmt: skip
    alike = choose(_run("A", [1]), _run("B", [1]), same, same, None)
    assert alike.agree and "agree at all 4 optimizer steps" in alike.why and not alike.windowed
    for why, w in cases.items():
        assert not w.windowed and why in w.why and w.describe().startswith("whole runs: ")
        assert w.to_dict()["windowed"] is False and why in str(w.to_dict()["why_not"])


def test_a_changes_the_result_line_names_the_first_differing_op_and_the_report_the_window() -> None:
    verdict = Verdict(status="diverged", mode="strict", summary="")
    assert first_op(verdict) is None
    fields = {"op": "aten::addmm", "module": "Net.fc1", "step": 0}
    verdict.reasons.append(Reason(Code.OP_DIFFERS, "…", fields=fields))
    op = first_op(verdict)
    assert op == "aten::addmm in Net.fc1 (optimizer step 0)"

    def execute(taken: tuple[str, ...]) -> Experiment:
        return Experiment("r1", list(taken), "diverged", "identical", divergence="step 0 (w)", op=op)

    proof = search([Factor("param:lr", "command")], execute, 2)
    proof.window = choose(_run("A", [5]), _run("B", [5]), _trace([0.0] * 9), _trace([0.0] * 6 + [1.0] * 3),
                          None).to_dict()  # fmt: skip
    said = proof_ui.text_lines(proof)
    window = "windowed, 4 optimizer steps from checkpoint ckpt/s5.pt (step 5), where A and B still agree"
    assert said[2] == f"  experiments: {window}"
    changes = "changes the result (first at step 0 (w); first op aten::addmm in Net.fc1 (optimizer step 0))"
    assert said[3] == f"  param:lr  {changes}"
    assert proof.to_dict()["findings"][0]["op"] == op and proof.to_dict()["experiments"][0]["op"] == op


def test_the_check_page_shows_the_proof_above_the_likely_causes_and_the_schema_holds() -> None:
    proof = Proof(budget=2, proved=["seed"], explained=True)
    proof.findings = search(
        [Factor("seed", "seeds")], lambda t: Experiment("r", list(t), "diverged", "identical"), 2
    ).findings
    proof.window = choose(
        Record(id="A", created=""), _run("B", [1]), _trace([1.0]), _trace([2.0]), None
    ).to_dict()
    report = report_ui.from_verdict(
        "repro check", Verdict(status="diverged", mode="strict", summary="x"), None, ["seeds differ"]
    )
    report.proved = report_ui.proved_lines(proof)
    page = report_ui.render_html(report)
    assert page.index("<h2>Proved causes</h2>") < page.index("<h2>Likely causes</h2>")
    assert "<li>experiments: whole runs (run A saved no checkpoint)</li>" in page
    assert "<li>seed: changes the result</li>" in page
    a, b = Record(id="a", created="2026-01-01T00:00:00Z"), Record(id="b", created="2026-01-01T00:00:00Z")
    result = diff_records(a, b, lambda digest: None)
    result.proof = proof
    from repro.ui import diff as diff_ui

    Draft202012Validator(schemas.load("diff")).validate(diff_ui.render_json(result))


def test_recording_the_op_stream_is_no_factor_of_the_mode() -> None:
    from repro.prove.factors import find_factors

    a, b = Record(id="a", created="2026-01-01T00:00:00Z"), Record(id="b", created="2026-01-01T00:00:00Z")
    a.determinism.env = {"REPRO_OPS": "2"}  # run A recorded with --ops
    assert [f.id for f in find_factors(diff_records(a, b, lambda d: None), a, b, lambda i: True)] == []
    a.determinism.env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    assert [f.id for f in find_factors(diff_records(a, b, lambda d: None), a, b, lambda i: True)] == ["mode"]
