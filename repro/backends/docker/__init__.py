"""The Docker backend, by role: engine, image builds, sandboxes, image archives, containers, housekeeping."""
