"""A recorded run executed again, in parts that `repro replay`, `repro check` and `repro resume` share:
where its inputs come from (`inputs`), its re-execution (`execute`), the two sides of its comparison
(`sides`), the request and outcome (`request`), and re-execute-then-compare (`verify`, for replay and
check --against)."""
