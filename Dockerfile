# syntax=docker/dockerfile:1
# The xds-control image: the product's wheel only (the lab, its simulator and benchmarks stay
# out), on a slim Python, run as a non-root user. Build and run: README, "Container image".
ARG PYTHON_VERSION=3.12

# Stage 1: the wheel of the product and the wheels of its dependencies (with the `kubernetes`
# extra: EndpointSlice discovery).
FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY xds_control ./xds_control
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[kubernetes]"

# Stage 2: those wheels installed, nothing else: no compiler, no sources, no pip cache.
FROM python:${PYTHON_VERSION}-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    XDS_CONTROL_LOG_FORMAT=json
# Only the wheels built above can be installed (--no-index): stage 1 chose their versions.
# hadolint ignore=DL3013
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels "xds-control[kubernetes]" \
    && groupadd --system --gid 10001 xds \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin xds
# A numeric user, so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 10001:10001
# ADS (gRPC) and the admin API (/healthz, /readyz, /metrics), as the config binds them.
EXPOSE 18000 9902
# Docker's own check; Kubernetes ignores it and probes /healthz and /readyz itself (the chart).
# XDS_CONTROL_HEALTH_URL points it elsewhere when the admin API is not on port 9902.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(os.environ.get('XDS_CONTROL_HEALTH_URL', 'http://127.0.0.1:9902/healthz'), timeout=2)"]
ENTRYPOINT ["xds-control", "serve"]
CMD ["--config", "/etc/xds-control/config/config.yaml"]
