"""`repro run` by phase: capture (`capture.py`), execute (`execute.py`), collect (`collect.py`)."""
