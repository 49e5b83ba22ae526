# repro environment image, CUDA. Same offline two-stage build as the CPU image (the wheels are
# installed in the first stage; the image holds what they installed, never the wheel files): the
# torch CUDA wheels carry the CUDA libraries; the driver comes from the host through the engine's
# GPU device requests (NVIDIA Container Toolkit). Code and data are mounted at run time.
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
    PIP_NO_CACHE_DIR=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
RUN python3 -m venv --without-pip /opt/venv
{{install}}
ENV PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp
