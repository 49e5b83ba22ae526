"""The slurm backend, by role: options, Slurm commands, the batch script, following a job, detached runs."""
