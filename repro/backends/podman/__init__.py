"""The podman backend: rootless Podman, through its Docker-compatible API and the docker backend's code."""
