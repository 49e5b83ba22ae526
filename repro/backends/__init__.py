"""Where a command runs: one module per backend (`local`, `docker`, `slurm`), listed with what each owns
in `registry`; the images they build; and `exporters/`, a run written for engines repro does not drive."""
