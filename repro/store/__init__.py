"""The store and the capsule format: run directories, records, limits, signing, hashing, atomic writes."""
