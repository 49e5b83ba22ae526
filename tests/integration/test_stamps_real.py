def test_the_runs_of_a_check_share_one_clock(project: Project) -> None:
    project.script("plot_report.py", "train.py")
    project.commit("train")
    r = project.repro("check", "--backend", "local", "--", "python", "train.py", "--epochs", "5")
    assert r.code == 0, r.out + r.err
    first, second = (_record(project, ref) for ref in ("latest~1", "latest"))
    assert second["determinism"]["source_date_epoch"] == first["determinism"]["source_date_epoch"]
    assert _outputs(second)["figures/loss.pdf"] == _outputs(first)["figures/loss.pdf"]
