"""Where `check --interrupt` kills a run, and how it names what a resume did not restore."""

from __future__ import annotations

import random

import pytest

from repro.compare.resumetrace import compare_ranks, first_cause, kill_steps


def _row(step: int, **changes: object) -> dict[str, object]:
    row: dict[str, object] = {"step": step, "params": 1.5, "grads": 0.25, "optimizer": 3.0, "lr": [0.01],
                              "scheduler": [step], "sampler": [2], "dataloader": f"b{step}",
                              "rng": {"python": "a", "numpy": "b", "torch": "c"}}  # fmt: skip
    for name, value in changes.items():
        if name.startswith("rng_"):
            row["rng"] = {**row["rng"], name[4:]: value}  # type: ignore[dict-item]
        else:
            row[name] = value
    return row


def test_every_kill_lands_after_a_checkpoint_and_before_the_run_ends() -> None:
    rng = random.Random(4)
    for _ in range(200):
        (step,) = kill_steps([8, 16, 24], 24, 1, 1, rng)
        assert 9 <= step <= 24
    assert set(kill_steps([8, 16, 24], 24, 300, 1, rng)) == set(range(9, 25))


def test_with_several_ranks_the_kill_is_two_steps_after_the_checkpoint() -> None:
    steps = kill_steps([8, 16], 16, 300, 2, random.Random(1))
    assert min(steps) == 10 and max(steps) == 16


def test_no_checkpoint_before_the_end_gives_no_kill_point() -> None:
    assert kill_steps([24], 24, 2, 1, random.Random(0)) == []
    assert kill_steps([], 24, 2, 1, random.Random(0)) == []


@pytest.mark.parametrize(
    ("change", "cause", "text"),
    [
        ({"params": 9.0}, "model", "the model's parameters were not restored"),
        ({"optimizer": 0.0}, "optimizer", "the optimizer state was not restored"),
        ({"lr": [0.02]}, "scheduler", "rank 0: lr 0.01 vs 0.02 at optimizer step 7"),
        ({"scheduler": [6]}, "scheduler", "rank 0: scheduler last_epoch 7 vs 6 at optimizer step 7"),
        ({"sampler": [1]}, "sampler", "rank 0: sampler.epoch 2 vs 1 at optimizer step 7"),
        ({"dataloader": "b2"}, "dataloader", "rank 0: dataloader: next batch indices differ"),
        ({"rng_torch": "z"}, "rng:torch", "rank 0: rng.torch differs at optimizer step 7"),
        ({"rng_torch": "z"}, "rng:torch", "torch's CPU RNG state was not restored"),
        ({"rng_numpy": "z"}, "rng:numpy", "NumPy's global RNG state was not restored"),
        ({"grads": 1.0}, "batch", "the batch differs"),
    ],
)
def test_the_first_differing_field_names_the_cause(change: dict[str, object], cause: str, text: str) -> None:
    reference = [_row(s) for s in range(10)]
    resumed = [_row(6), _row(7, **change), _row(8, params=2.0)]
    found = first_cause(reference, resumed, rank=0)
    assert found is not None and found.step == 7 and found.cause == cause
    assert text in found.describe() and found.describe().startswith("rank 0: ")
    assert "at optimizer step 7 — " in found.describe()


def test_a_model_that_differs_is_blamed_before_what_follows_from_it() -> None:
    found = first_cause([_row(3)], [_row(3, params=0.0, lr=[1.0], grads=9.0)], rank=1)
    assert found is not None and found.cause == "model" and found.rank == 1


def test_identical_traces_blame_nothing() -> None:
    assert first_cause([_row(s) for s in range(5)], [_row(3), _row(4)], rank=0) is None


def test_the_first_differing_tensor_is_named_by_its_state_path() -> None:
    state = {
        "params[0]": 1.0,
        "params[1]": 0.5,
        "optimizer.state[0].exp_avg": 2.0,
        "optimizer.state[1].exp_avg": 1.0,
    }
    reference = [_row(4, state=state)]
    spoiled = {**state, "optimizer.state[1].exp_avg": 1.5}
    found = first_cause(reference, [_row(4, optimizer=3.5, state=spoiled)], rank=1)
    assert found is not None and found.path == "optimizer.state[1].exp_avg"
    assert found.describe() == (
        "rank 1: optimizer.state[1].exp_avg differs (sum 1.0 vs 1.5) at optimizer step 4 — "
        "the optimizer state was not restored"
    )
    moved = first_cause(reference, [_row(4, params=1.0, state={**state, "params[1]": 0.0})], rank=0)
    assert moved is not None and moved.cause == "model" and moved.path == "params[1]"


def test_the_sampler_epoch_is_blamed_before_the_batches_it_orders() -> None:
    found = first_cause([_row(5)], [_row(5, sampler=[0], dataloader="other", grads=2.0)], rank=1)
    assert found is not None and found.named() == "rank 1: sampler.epoch 2 vs 0"


def test_of_several_schedulers_the_one_that_differs_is_named_by_its_place() -> None:
    found = first_cause([_row(5, scheduler=[5, 17])], [_row(5, scheduler=[5, 16])], rank=0)
    assert found is not None and found.state_path() == "scheduler[1] last_epoch 17 vs 16"


def test_each_rank_is_compared_on_the_steps_both_runs_took() -> None:
    reference = {0: [_row(s) for s in range(6)], 1: [_row(s) for s in range(6)]}
    resumed = {0: [_row(4), _row(5)], 1: [_row(4), _row(5, rng_torch="z")]}
    zero, one = compare_ranks(reference, resumed)
    same = "rank 0: same state at 2 optimizer step(s) from the resume point"
    assert zero.to_dict() == {"rank": 0, "steps": 2, "same": True, "text": same}
    assert one.to_dict()["same"] is False and one.to_dict()["path"] == "rng.torch differs"
    assert one.text() == "rank 1: rng.torch differs at optimizer step 5"
    (lost,) = compare_ranks({}, {2: [_row(1)]})
    assert lost.steps == 0 and lost.text() == "rank 2: no optimizer step to compare"
