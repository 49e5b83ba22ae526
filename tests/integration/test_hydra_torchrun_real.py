"""A real Hydra app (single run and multirun) and a real torchrun command line, run under repro.

Each run is a separate process; reproducibility is checked by running twice (repro check) and comparing bytes.
"""

from __future__ import annotations

import json
import time

import pytest

from repro.store.runs import Store
from tests.conftest import Project

pytestmark = pytest.mark.slow
pytest.importorskip("hydra", reason="hydra-core is not installed (pip install 'repro-capsule[integrations]')")

CONFIG = """\
model:
  hidden: 8
optim:
  lr: 0.05
  momentum: 0.9
epochs: 2
batch_size: 16
data: data/points.csv
save: model.pt
"""


def _hydra_project(project: Project) -> None:
    project.script("hydra_train.py", "train.py")
    project.write("conf/config.yaml", CONFIG)
    project.write(".gitignore", "outputs/\nmultirun/\n")
    project.points()
    project.commit("hydra app")


def test_a_hydra_app_records_overrides_and_composed_config_and_passes_check(project: Project) -> None:
    _hydra_project(project)
    r = project.repro("check", "--backend", "local", "--data", "data", "--json", "--", "python", "train.py",
                      "optim.lr=0.1", "+tag=baseline", "~optim.momentum", "epochs=1")  # fmt: skip
    assert r.code == 0, r.out + r.err
    assert json.loads(r.out)["status"] == "identical"  # both runs wrote into the one pinned run dir
    store = Store(project.root)
    record = store.resolve("latest").record
    params = record.command.params
    assert params["optim.lr"] == 0.1 and params["tag"] == "baseline"  # overrides, typed
    assert params["model.hidden"] == 8 and params["save"] == "model.pt"  # the composed config
    assert params["optim.momentum"] is None  # deleted by ~optim.momentum, absent from the composed config
    assert record.command.argv == ["python", "train.py", "optim.lr=0.1", "+tag=baseline", "~optim.momentum",
                                   "epochs=1"]  # the user's command, as given  # fmt: skip
    (pinned,) = record.command.injected  # repro's own argument, recorded apart
    assert pinned.startswith("hydra.run.dir=outputs/") and "hydra.run.dir" not in params
    assert store.resolve("latest~1").record.command.injected == [pinned]  # one run dir for both runs
    run_dir = pinned.partition("=")[2]
    assert [o.path for o in record.results.outputs] == [f"{run_dir}/model.pt"]
    assert f"hydra:{run_dir}/.hydra/config.yaml" in record.results.logs
    assert f"hydra:{run_dir}/train.log" in record.results.logs

    r = project.repro("check", "--backend", "local", "--", "python", "train.py", "-m", "epochs=1,2")
    assert r.code == 2 and "a Hydra multirun is several runs" in r.err


def test_two_hydra_runs_differing_in_seed_diff_to_the_seed_alone(project: Project) -> None:
    _hydra_project(project)
    common = ["--backend", "local", "--data", "data", "--", "python", "train.py", "optim.lr=0.1", "epochs=1"]
    for seed in ("1", "2"):
        r = project.repro("run", "--seed", seed, *common)
        assert r.code == 0, r.err
        assert "not declared data" not in r.err  # conf/config.yaml is tracked: code, not data
        time.sleep(1.1)  # another second: another pinned run directory
    store = Store(project.root)
    a, b = store.resolve("latest~1").record, store.resolve("latest").record
    assert a.data.undeclared == [] and b.data.undeclared == []
    assert "conf/config.yaml" in {e.path for e in a.code.files}
    assert a.command.injected != b.command.injected  # repro pinned two run directories …
    r = project.repro("diff", "latest~1", "latest", "--json")
    assert r.code == 0, r.err
    diff = json.loads(r.out)
    causes = diff["likely_causes"]
    assert causes[0]["section"] == "seeds" and causes[0]["reason"] == "seed changed: seed 1 → 2", causes
    assert not any("hydra" in c["reason"] or c["section"] == "command" for c in causes), causes  # … no cause
    sections = {s["name"]: s for s in diff["sections"]}
    assert sections["command"]["changes"] == []
    (model,) = sections["outputs"]["changes"]  # the model, compared in place in each run's directory
    assert model["kind"] == "changed" and model["key"].endswith("/model.pt")
    r = project.repro("diff", "latest~1", "latest")
    assert "hydra.run.dir" not in r.out.split("Outputs")[0]


def test_a_hydra_multirun_is_one_record_per_job(project: Project) -> None:
    _hydra_project(project)
    r = project.repro("run", "--backend", "local", "--seed", "7", "--data", "data", "--",
                      "python", "train.py", "-m", "optim.lr=0.05,0.2", "epochs=1")  # fmt: skip
    assert r.code == 0, r.err
    store = Store(project.root)
    jobs = [store.resolve("latest~1").record, store.resolve("latest").record]
    assert [j.command.params["optim.lr"] for j in jobs] == [0.05, 0.2]
    assert all(j.command.params["epochs"] == 1 and j.seeds.master == 7 for j in jobs)
    assert all("-m" not in j.command.argv for j in jobs)
    dirs = [o.path.rsplit("/", 1)[0] for j in jobs for o in j.results.outputs]
    assert len(dirs) == 2 and dirs[0].startswith("multirun/") and dirs[0].endswith("/0")
    assert dirs[1] == dirs[0][:-1] + "1"
    a, b = (j.results.outputs[0].hash for j in jobs)
    assert a != b  # other learning rates, other weights
    assert all(j.command.injected == [f"hydra.run.dir={d}"] for j, d in zip(jobs, dirs, strict=True))
    assert all(j.command.argv[-2:] == [f"optim.lr={j.command.params['optim.lr']}", "epochs=1"] for j in jobs)


def test_torchrun_on_the_command_line_is_the_same_run_as_nproc_per_node(project: Project) -> None:
    project.script("ddp_train.py", "train_ddp.py")
    project.points()
    project.commit("ddp")
    common = ["run", "--backend", "local", "--seed", "5", "--data", "data", "--"]
    r = project.repro(*common, "torchrun", "--nproc-per-node", "2", "--standalone", "train_ddp.py",
                      "--epochs", "1")  # fmt: skip
    assert r.code == 0, r.err
    r = project.repro("run", "--backend", "local", "--seed", "5", "--nproc-per-node", "2", "--data", "data",
                      "--", "python", "train_ddp.py", "--epochs", "1")  # fmt: skip
    assert r.code == 0, r.err
    store = Store(project.root)
    via_torchrun, via_flag = store.resolve("latest~1").record, store.resolve("latest").record
    assert via_torchrun.command.argv == ["torchrun", "--nproc-per-node", "2", "--standalone", "train_ddp.py",
                                         "--epochs", "1"]  # fmt: skip
    launched = ["python", "train_ddp.py", "--epochs", "1"]
    assert via_torchrun.command.executed() == via_flag.command.argv == launched
    assert via_torchrun.command.nproc_per_node == 2 and via_torchrun.env.world_size == 2
    assert via_torchrun.seeds.per_rank == via_flag.seeds.per_rank
    assert "rank1.stdout" in via_torchrun.results.logs
    assert [(o.path, o.hash) for o in via_torchrun.results.outputs] == [
        (o.path, o.hash) for o in via_flag.results.outputs
    ]
    assert any("--standalone" in w.message for w in via_torchrun.warnings)
