"""Known artifact formats compared by content: TensorBoard events and metric tables.

``values`` holds the comparison of named value series (pure data); ``tensorboard`` reads
event files (through the optional ``tensorboard`` package) and ``tables`` reads JSON,
JSONL and CSV metric files into such series. Tensor files live in ``repro.tensors``.
"""
