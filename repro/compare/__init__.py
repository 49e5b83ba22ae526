"""Compare two runs' results: outputs, tensors, tables, TensorBoard, metric series, stdout → a verdict."""
