"""Verdicts and diffs on real training code: timing text, TensorBoard events, metric files, self-seeding.

The script seeds itself (torch.manual_seed(1337)), logs to TensorBoard through SummaryWriter
(whose event file names and contents carry wall times), prints tqdm-style bars and `ms/batch`
timings, and writes a metrics.json with a `train_runtime`. Each run is a separate process.
"""

from __future__ import annotations

import json

from repro.compare.verdict import compare_runs
from repro.rerun.sides import of_run
from repro.store.runs import Store
from tests.conftest import Project

ARGS = ["--epochs", "2", "--workers", "2", "--output-dir", "outputs", "--save", "outputs/model.pt"]


def test_self_seeding_tensorboard_script_replays_identical_and_another_lr_diverges(project: Project) -> None:
    project.script("tb_train.py", "train.py")
    project.commit("train")
    r = project.repro("run", "--backend", "local", "--seed", "5", "--", "python", "train.py", *ARGS)
    assert r.code == 0, r.err

    # A replay in another process: identical, although event file names, wall times, runtimes differ.
    r = project.repro("replay", "latest", "--json")
    assert r.code == 0, r.out + r.err
    verdict = json.loads(r.out)
    assert verdict["status"] == "identical", verdict["reasons"]
    by_kind = {o["kind"]: o for o in verdict["outputs"]}
    events = by_kind["tensorboard"]
    assert events["status"] == "same" and events["values"]["compared"] > 0
    assert events["path"].startswith("outputs/runs/") and events["replay_path"] is not None  # clock names
    table = by_kind["table"]
    assert table["path"] == "outputs/metrics.json" and table["values"]["ignored"] == ["train_runtime"]
    model = next(o for o in verdict["outputs"] if o["path"] == "outputs/model.pt")
    assert model["status"] == "same"

    # Another master seed and another learning rate: the script's own seed makes repro's moot,
    # so the learning rate is the cause, and the TensorBoard scalars part at the second step.
    r = project.repro(
        "run", "--backend", "local", "--seed", "7", "--", "python", "train.py", *ARGS, "--lr", "0.3"
    )
    assert r.code == 0, r.err
    r = project.repro("diff", "latest~2", "latest", "--json")
    assert r.code == 0, r.err
    diff = json.loads(r.out)
    assert diff["results_differ"] is True
    assert [c["category"] for c in diff["likely_causes"]] == ["input"]
    assert diff["likely_causes"][0]["reason"] == "hyper-parameters changed: lr = 0.3 (added)"
    seeds = next(s for s in diff["sections"] if s["name"] == "seeds")
    assert seeds["summary"].startswith("seed 5 → 7, overridden by the script (torch.manual_seed(1337)")

    store = Store(project.root)
    first, third = (store.resolve(ref) for ref in ("latest~2", "latest"))
    v = compare_runs(of_run(first), of_run(third), "gpu")
    assert v.status == "diverged"
    tb = next(r for r in v.reasons if r.path and r.path.startswith("outputs/runs/"))
    assert tb.code == "metric_differs"
    assert (tb.fields["name"], tb.fields["step"]) == ("train/loss", 2)  # step 1's loss precedes any update
    assert "train/loss at step 2" in tb.message
