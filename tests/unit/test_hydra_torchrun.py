"""Hydra overrides as parameters, Hydra multirun expansion, and torchrun command lines."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from repro.config import Flags, resolve
from repro.errors import UsageError
from repro.facts import hydra
from repro.facts.command import flatten_config, hydra_override, parse_params, parse_torchrun
from repro.run.capture import expand, launch
from repro.run.prepared import RunRequest

NOW = datetime(2026, 11, 22, 17, 5, 9)


def test_hydra_overrides_are_typed_like_options() -> None:
    params = parse_params(["optim.lr=0.1", "+model.depth=3", "++trainer.fast=true", "~scheduler",
                           "name='my run'", "layers=[16,32]", "seed=null", "--epochs", "2"])  # fmt: skip
    assert params == {
        "optim.lr": 0.1, "model.depth": 3, "trainer.fast": True, "scheduler": None,
        "name": "my run", "layers": [16, 32], "seed": None, "epochs": 2,
    }  # fmt: skip


def test_an_override_after_a_flag_is_not_its_value() -> None:
    assert parse_params(["--multirun", "optim.lr=0.1,0.01"]) == {"multirun": True, "optim.lr": [0.1, 0.01]}
    assert parse_params(["-m", "db=mysql"]) == {"m": True, "db": "mysql"}


def test_what_is_not_an_override() -> None:
    for arg in ("data.csv", "train.py", "~/data", "=x", "1=2"):
        assert hydra_override(arg) is None, arg
    assert hydra_override("db/engine=pg") == ("db/engine", "pg")


def test_flatten_config() -> None:
    assert flatten_config({"optim": {"lr": 0.1, "betas": [0.9, 0.99]}, "empty": {}, "n": 1}) == {
        "optim.lr": 0.1, "optim.betas": [0.9, 0.99], "empty": {}, "n": 1,
    }  # fmt: skip


def test_hydra_apps_are_recognised_by_their_import_or_hydra_keys() -> None:
    assert hydra.is_hydra_app("import hydra\nfrom omegaconf import DictConfig\n", [])
    assert hydra.is_hydra_app("from hydra import compose\n", [])
    assert hydra.is_hydra_app(None, ["hydra.run.dir=out"])
    assert not hydra.is_hydra_app("import argparse  # not hydra\n", ["lr=1"])


def test_the_run_dir_is_pinned_unless_the_command_sets_it() -> None:
    assert hydra.pin_run_dir(["lr=1"], NOW) == ["hydra.run.dir=outputs/2026-11-22/17-05-09"]
    assert hydra.pin_run_dir(["hydra.run.dir=runs/x"], NOW) == []  # the user's own: nothing added
    assert hydra.output_root(["hydra.run.dir=runs/${now:%H}"]) == "runs"
    assert hydra.output_root(["lr=1"]) == "outputs"


def test_a_multirun_is_one_job_per_combination_in_hydras_order() -> None:
    jobs = hydra.sweep_jobs(["-m", "lr=0.1,0.01", "+depth=range(1,3)", "opt=adam"], NOW)
    assert jobs is not None
    assert [j.overrides for j in jobs] == [
        ["lr=0.1", "+depth=1", "opt=adam"],
        ["lr=0.1", "+depth=2", "opt=adam"],
        ["lr=0.01", "+depth=1", "opt=adam"],
        ["lr=0.01", "+depth=2", "opt=adam"],
    ]
    pinned = [[f"hydra.run.dir=multirun/2026-11-22/17-05-09/{n}"] for n in range(4)]
    assert [j.injected for j in jobs] == pinned
    assert hydra.job_argv(["--verbose", "-m", "lr=0.1,0.01"], jobs[0]) == ["--verbose", *jobs[0].overrides]
    assert hydra.sweep_jobs(["lr=1"], NOW) is None
    swept = hydra.sweep_jobs(["--multirun", "hydra.sweep.dir=sweeps", "a=1,2"], NOW)
    assert swept is not None and swept[1].overrides == ["a=2"]
    assert swept[1].injected == ["hydra.run.dir=sweeps/1"]


def test_a_bad_sweep_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="Hydra cannot parse"):
        hydra.sweep_jobs(["-m", "lr=range(1,"], NOW)


def test_hydra_bookkeeping_files() -> None:
    paths = ["outputs/d/t/.hydra/config.yaml", "outputs/d/t/.hydra/hydra.yaml", "outputs/d/t/train.log",
             "outputs/d/t/model.pt", "outputs/d/t/ckpt/last.log", "outputs/other.log"]  # fmt: skip
    jobs = hydra.job_dirs(paths)
    assert jobs == {"outputs/d/t"}
    assert [p for p in paths if not hydra.is_bookkeeping(p, jobs)] == [
        "outputs/d/t/model.pt", "outputs/d/t/ckpt/last.log", "outputs/other.log",
    ]  # fmt: skip
    assert hydra.composed_params("optim:\n  lr: 0.1\nname: x\n") == {"optim.lr": 0.1, "name": "x"}


def test_torchrun_lines() -> None:
    launch_ = parse_torchrun(["torchrun", "--nproc-per-node", "2", "--standalone", "train.py", "--lr", "1"])
    assert launch_ is not None
    assert (launch_.argv, launch_.nproc_per_node, launch_.ignored) == (
        ["python", "train.py", "--lr", "1"], 2, ["--standalone"],
    )  # fmt: skip
    module = parse_torchrun(["python", "-m", "torch.distributed.run", "--nproc_per_node=3", "--nnodes=1",
                             "--master-port", "29500", "-m", "pkg.train"])  # fmt: skip
    assert module is not None and module.argv == ["python", "-m", "pkg.train"] and module.nproc_per_node == 3
    assert module.ignored == ["--master-port 29500"]
    assert parse_torchrun(["python", "train.py"]) is None


@pytest.mark.parametrize(
    "argv, message",
    [
        (["torchrun", "--nnodes", "2", "train.py"], "one node"),
        (["torchrun", "--nproc-per-node", "gpu", "train.py"], "needs a number"),
        (["torchrun", "--elastic-magic", "train.py"], "not understood"),
        (["torchrun", "--nproc-per-node", "2"], "no script"),
    ],
)
def test_torchrun_lines_repro_cannot_run(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_torchrun(argv)


def test_torchrun_is_the_same_run_as_nproc_per_node(tmp_path: Path) -> None:
    plan, two, three = (resolve(tmp_path, Flags(nproc_per_node=n)) for n in (None, 2, 3))
    launched = launch(RunRequest(["torchrun", "--nproc-per-node=2", "train.py"], tmp_path), plan)
    assert launched == (["python", "train.py"], 2, True, [])
    one = launch(RunRequest(["torchrun", "--nproc-per-node=1", "train.py"], tmp_path), plan)
    assert one[1:3] == (1, True)  # one rank, still under torchrun, as --nproc-per-node 1 would be
    assert launch(RunRequest(["train.py"], tmp_path), two)[:2] == (["python", "train.py"], 2)
    assert launch(RunRequest(["torchrun", "--nproc-per-node=2", "train.py"], tmp_path), two)[1] == 2
    with pytest.raises(UsageError, match="disagree"):
        launch(RunRequest(["torchrun", "--nproc-per-node=2", "train.py"], tmp_path), three)


def test_expand_gives_one_request_per_multirun_job(tmp_path: Path) -> None:
    plan = resolve(tmp_path)
    requests = expand(RunRequest(["train.py", "-m", "lr=1,2"], tmp_path), plan)
    assert [r.argv for r in requests] == [["python", "train.py", "lr=1"], ["python", "train.py", "lr=2"]]
    assert all(len(r.injected) == 1 and r.injected[0].startswith("hydra.run.dir=multirun/") for r in requests)
    single = RunRequest(["train.py", "lr=1"], tmp_path)
    assert expand(single, plan) == [single]  # not a Hydra app: as given
    (tmp_path / "app.py").write_text("import hydra\n")
    (pinned,) = expand(RunRequest(["torchrun", "--nproc-per-node=2", "app.py", "lr=1"], tmp_path), plan)
    assert pinned.argv == ["torchrun", "--nproc-per-node=2", "app.py", "lr=1"]  # the user's, as given
    (run_dir,) = pinned.injected
    assert run_dir.startswith("hydra.run.dir=outputs/")
    assert expand(pinned, plan) == [pinned]  # pinned once: a check's runs and a replay share it
    launched = launch(pinned, plan)[0]
    assert launched == ["python", "app.py", "lr=1", run_dir]  # run with repro's argument last
