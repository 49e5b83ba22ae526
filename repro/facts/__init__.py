"""What a run is made of, one module per captured fact: code (git), data, deps (the lock), env,
seeds, secrets (redaction), the command and its parameters, Hydra.

`repro run` captures them before a run starts; `repro.capture(...)` (repro/inprocess.py) records
them from inside a process that cannot be wrapped.
"""
