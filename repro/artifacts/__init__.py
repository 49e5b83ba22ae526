"""Known artifact formats compared by content: TensorBoard events, metric tables, and files whose
bytes carry a clock (figures, documents, archives).

``values`` holds the comparison of named value series (pure data); ``tensorboard`` reads
event files (through the optional ``tensorboard`` package) and ``tables`` reads JSON,
JSONL and CSV metric files into such series; ``stamps`` compares PDF, PostScript, PNG, SVG,
gzip, zip and tar files with their time fields left out. Tensor files live in ``repro.tensors``.
"""
