# repro environment image, CPU. repro renders this template: the base is an immutable
# image id and the image is tagged by the hash of (this text, the lockfile, the base id).
# Two stages. In the first, the build mark becomes one COPY + RUN pair per layer group (large
# wheels such as torch first, each group alone, then the rest): the group's wheels are copied in
# and installed under a prefix of their own. The image makes a venv of its own without pip (nothing
# pre-installed can shadow or mix with a locked distribution), then copies each group's installed
# files into it, one layer per group, so a small change reuses the large layers and no layer of the
# image holds a wheel file; repro then checks that its distributions are exactly the lock. Code and data are mounted at run time, never copied in. Nothing here
# uses the network.
FROM {{base}} AS wheels
ENV LANG=C.UTF-8 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PIP_NO_INDEX=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN python3 -m venv /opt/venv
{{build}}

FROM {{base}}
ENV LANG=C.UTF-8 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PIP_NO_INDEX=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN python3 -m venv --without-pip /opt/venv
{{install}}
ENV PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp
