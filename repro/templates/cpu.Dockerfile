# repro environment image, CPU. repro renders this template: the base is an immutable
# image id and the image is tagged by the hash of (this text, the lockfile, the base id).
# Code and data are mounted at run time, never copied in. Nothing here uses the network.
FROM {{base}}
ENV LANG=C.UTF-8 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PIP_NO_INDEX=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN python3 -m venv /opt/venv
COPY wheelhouse/ /opt/repro-build/wheelhouse/
COPY requirements.lock /opt/repro-build/requirements.lock
RUN if grep -q '==' /opt/repro-build/requirements.lock; then \
        pip install --no-index --require-hashes --find-links /opt/repro-build/wheelhouse \
            -r /opt/repro-build/requirements.lock; \
    fi \
 && rm -rf /opt/repro-build
ENV PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp
