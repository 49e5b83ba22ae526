# repro environment image, CPU. repro renders this template: the base is an immutable
# image id and the image is tagged by the hash of (this text, the lockfile, the base id).
# The install mark becomes one COPY + RUN pair per layer group: large wheels (torch, the nvidia
# libraries) first, each in a layer of its own, then the rest, so a small change reuses them.
# Code and data are mounted at run time, never copied in. Nothing here uses the network.
FROM {{base}}
ENV LANG=C.UTF-8 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PIP_NO_INDEX=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN python3 -m venv /opt/venv
{{install}}
ENV PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp
