"""Where repro meets the tools its users train with: Hydra (facts/hydra.py), MLflow, W&B,
Lightning, Hugging Face (the notebook magic is `repro.ui.notebook`). Each module imports its tool;
none is needed by repro itself.
"""
