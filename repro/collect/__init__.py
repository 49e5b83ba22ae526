"""What a run produced, collected after it ends: outputs and their owners, process reports, checkpoints."""
