"""`repro diff --prove`'s rules without training: which experiments the search makes within its budget
and what it concludes (the executions are a fake that answers by a rule), the factors found in a
diff, and the record an experiment executes (run A with factors taken from run B)."""

from __future__ import annotations

from collections.abc import Callable

from jsonschema import Draft202012Validator

from repro import schemas
from repro.diff import diff_records
from repro.diff.proof import Experiment, Factor
from repro.facts.command import parse_params, swap_param
from repro.prove.factors import find_factors, hybrid
from repro.prove.search import search
from repro.store.record import DataInput, FileEntry, Record


def _fake(result: Callable[[frozenset[str]], str], log: list[tuple[str, ...]]) -> Callable[..., Experiment]:
    """An execution whose result is ``result(taken)``: "a", "b" or anything else (neither)."""

    def execute(taken: tuple[str, ...]) -> Experiment:
        log.append(taken)
        got = result(frozenset(taken))
        return Experiment(
            run=f"r{len(log)}", factors=list(taken), vs_a="identical" if got == "a" else "diverged",
            vs_b="identical" if got == "b" else "diverged", divergence=None if got == "a" else "step 0 (w)",
        )  # fmt: skip

    return execute


def _factors(*ids: str) -> list[Factor]:
    return [Factor(i, "command") for i in ids]


def test_each_cause_alone_then_together_and_a_factor_without_effect() -> None:
    causes = {"data:d", "seed"}

    def result(taken: frozenset[str]) -> str:
        hit = taken & causes
        return "a" if not hit else "b" if hit == causes else "x"

    log: list[tuple[str, ...]] = []
    proof = search(_factors("param:flag", "data:d", "seed"), _fake(result, log), budget=6)
    assert proof.explained and proof.proved == ["data:d", "seed"]
    effects = {f.factor.id: f.effect for f in proof.findings}
    assert effects == {"param:flag": "no_effect", "data:d": "changes_result", "seed": "changes_result"}
    assert log == [("param:flag",), ("data:d",), ("seed",), ("data:d", "seed")]  # no combination twice
    assert [e.run for e in proof.experiments] == ["r1", "r2", "r3", "r4"]


def test_a_combination_alone_changes_the_result() -> None:
    def result(taken: frozenset[str]) -> str:
        return "b" if {"code:model.py", "param:scale"} <= taken else "a"

    log: list[tuple[str, ...]] = []
    proof = search(_factors("code:model.py", "param:scale", "param:tag"), _fake(result, log), budget=8)
    assert proof.explained and proof.proved == ["code:model.py", "param:scale"]
    found = {f.factor.id: f for f in proof.findings}
    assert found["code:model.py"].effect == "only_together"
    assert found["code:model.py"].together_with == ["param:scale"]
    assert found["param:scale"].together_with == ["code:model.py"]
    assert found["param:tag"].effect == "no_effect"
    assert len(log) == len(set(map(frozenset, log)))


def test_one_factor_alone_gives_b_and_the_search_stops_there() -> None:
    log: list[tuple[str, ...]] = []
    proof = search(_factors("threads"), _fake(lambda t: "b" if t else "a", log), budget=2)
    assert proof.proved == ["threads"] and log == [("threads",)]


def test_the_budget_bounds_the_executions_and_says_what_was_left() -> None:
    log: list[tuple[str, ...]] = []
    proof = search(_factors("a1", "a2", "a3"), _fake(lambda t: "x", log), budget=2)
    assert len(log) == 2 and not proof.explained
    assert proof.untested == ["a3"]
    assert any("budget of 2 executions ran out" in n for n in proof.notes)


def test_factors_that_cannot_be_swapped_are_named_never_executed() -> None:
    factors = [*_factors("seed"), Factor("dependencies", "dependencies", why_not="needs B's image")]
    log: list[tuple[str, ...]] = []
    proof = search(factors, _fake(lambda t: "x", log), budget=4)
    assert log == [("seed",)]
    cannot = proof.of("cannot_swap")
    assert [f.factor.id for f in cannot] == ["dependencies"]
    assert proof.to_dict()["findings"][1]["factor"]["why_not"] == "needs B's image"


def test_swap_param_takes_one_option_from_the_other_command_line() -> None:
    a = ["python", "-u", "train.py", "--lr", "0.1", "--epochs=3", "data"]
    b = ["python", "-u", "train.py", "--epochs", "4", "--lr=0.2", "data", "--tag"]
    assert swap_param(a, b, "lr") == ["python", "-u", "train.py", "--lr=0.2", "--epochs=3", "data"]
    assert swap_param(a, b, "tag") == [*a, "--tag"]
    assert swap_param(b, a, "tag") == ["python", "-u", "train.py", "--epochs", "4", "--lr=0.2", "data"]
    assert swap_param(a, b, "nothing") is None
    assert parse_params(swap_param(a, b, "epochs")[3:]) == {"lr": 0.1, "epochs": 4}  # type: ignore[index]


def _record(seed: int, argv: list[str], code: str, data: str) -> Record:
    r = Record(id=f"run{seed}", created="2026-01-01T00:00:00Z")
    r.command.argv = argv
    r.command.params = parse_params(argv[2:])
    r.seeds.master = seed
    r.code.files = [
        FileEntry(path="model.py", hash=code, size=1),
        FileEntry(path="train.py", hash="t", size=1),
    ]
    r.data.inputs = [
        DataInput(
            path="data/train.csv", digest=data, files=[FileEntry(path="data/train.csv", hash=data, size=1)]
        )
    ]
    r.determinism.threads, r.determinism.mode = 1, "strict"
    return r


def test_the_factors_of_a_diff_and_the_record_an_experiment_executes() -> None:
    a = _record(1, ["python", "train.py", "--lr", "0.1"], "m1", "d1")
    b = _record(2, ["python", "train.py", "--lr", "0.2", "--quiet"], "m2", "d2")
    b.determinism.threads = 2
    diff = diff_records(a, b, lambda digest: None)
    factors = find_factors(diff, a, b, lambda item: item.digest != "d2")
    by_id = {f.id: f for f in factors}
    assert set(by_id) >= {
        "param:lr",
        "param:quiet",
        "code:model.py",
        "data:data/train.csv",
        "seed",
        "threads",
    }
    assert by_id["data:data/train.csv"].why_not is not None  # B's copy is not at hand
    assert by_id["param:lr"].swappable and (by_id["param:lr"].a, by_id["param:lr"].b) == (0.1, 0.2)

    made = hybrid(a, b, ["param:lr", "code:model.py", "seed", "threads"])
    assert made.command.argv == ["python", "train.py", "--lr", "0.2"] and made.command.params["lr"] == 0.2
    assert {e.path: e.hash for e in made.code.files} == {"model.py": "m2", "train.py": "t"}
    assert made.seeds.master == 2 and made.determinism.threads == 2
    assert made.data.inputs[0].digest == "d1"  # not taken
    assert a.seeds.master == 1 and a.command.argv[-1] == "0.1"  # run A's own record is untouched


def test_the_proof_comes_first_in_the_text_and_the_markdown() -> None:
    from repro.ui import diff as diff_ui

    a = _record(1, ["python", "train.py", "--lr", "0.1"], "m1", "d1")
    b = _record(2, ["python", "train.py", "--lr", "0.2"], "m1", "d1")
    b.results.final_metrics = {"loss": 0.5}
    result = diff_records(a, b, lambda digest: None)
    log: list[tuple[str, ...]] = []
    result.proof = search(_factors("param:lr", "seed"), _fake(lambda t: "b" if "seed" in t else "a", log), 4)
    text = diff_ui.render_text(result, width=None)
    assert text.startswith("proved causes: seed turn A's result into B's")
    assert "  param:lr  no effect" in text and "  seed      changes the result (first at step 0 (w))" in text
    assert text.index("proved causes") < text.index("likely causes")
    md = diff_ui.render_markdown(result)
    assert md.index("**Proved causes") < md.index("**Likely causes") and "| `seed` | changes the result" in md
    document = diff_ui.render_json(result)
    assert document["proof"]["proved"] == ["seed"] and document["proof"]["executions"] == 2
    Draft202012Validator(schemas.load("diff")).validate(document)  # the schema shipped describes it


def test_the_html_report_shows_the_proved_causes_above_the_likely_ones() -> None:
    from repro.ui import report as report_ui

    a = _record(1, ["python", "train.py", "--lr", "0.1"], "m1", "d1")
    b = _record(2, ["python", "train.py", "--lr", "0.2"], "m1", "d1")
    b.results.final_metrics = {"loss": 0.5}
    result = diff_records(a, b, lambda digest: None)
    log: list[tuple[str, ...]] = []
    result.proof = search(_factors("param:lr", "seed"), _fake(lambda t: "b" if "seed" in t else "a", log), 4)
    page = report_ui.render_html(report_ui.from_diff(result, None))
    assert page.index("<h2>Proved causes</h2>") < page.index("<h2>Likely causes</h2>")
    assert "<li>param:lr: no effect</li>" in page and "seed turn A&#x27;s result into B&#x27;s" in page


def test_a_factor_whose_experiment_cannot_run_is_named_and_left_out_of_combinations() -> None:
    log: list[tuple[str, ...]] = []
    fake = _fake(
        lambda t: "b" if {"seed", "param:lr"} <= t else "x" if t & {"seed", "param:lr"} else "a", log
    )

    def execute(taken: tuple[str, ...]) -> Experiment:
        if "data:d" in taken:
            return Experiment("", list(taken), "failed", "failed", error="run B's data/d.csv is not kept")
        return fake(taken)

    proof = search(_factors("data:d", "seed", "param:lr"), execute, budget=6)
    assert proof.proved == ["seed", "param:lr"] and all("data:d" not in t for t in log)
    (cannot,) = proof.of("cannot_swap")
    assert cannot.factor.why_not == "its experiment cannot run: run B's data/d.csv is not kept"
    assert proof.to_dict()["experiments"][0]["error"] == "run B's data/d.csv is not kept"
    from repro.ui import proof as proof_ui

    said = proof_ui.text_lines(proof)
    assert "    (not run)  data:d from B: could not run: run B's data/d.csv is not kept (0.0s)" in said
    assert "  data:d    cannot be swapped: its experiment cannot run: run B's data/d.csv is not kept" in said
