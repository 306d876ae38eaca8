# syntax=docker/dockerfile:1
# apcore-a2a agent image.
#
#   docker build -t apcore-a2a .
#   docker run -p 8000:8000 -v "$PWD/extensions:/app/extensions:ro" apcore-a2a
#
# Configure with environment variables (A2A_*, JWT_*, APCORE_*; docs/configuration.md) or
# mount your own agent YAML over /etc/apcore-a2a/agent.yaml. tests/config/
# test_container_install.py replays this file's install and command in a fresh venv.

ARG PYTHON_VERSION=3.11

# -- build: install the package and its extras into a venv --------------------------------
FROM python:${PYTHON_VERSION}-slim-bookworm AS build
# Extras baked into the image: sql = SQLite + PostgreSQL task stores, metrics = /metrics.
# Add grpc, telemetry or encryption with --build-arg EXTRAS=sql,metrics,grpc.
ARG EXTRAS=sql,metrics
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
COPY pyproject.toml README.md /src/
COPY apcore_a2a /src/apcore_a2a
RUN --mount=type=cache,target=/root/.cache/pip \
    /opt/venv/bin/pip install "/src[${EXTRAS}]"

# -- runtime: the venv on a clean slim image, no compilers, non-root ----------------------
FROM python:${PYTHON_VERSION}-slim-bookworm
RUN useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin app \
    && mkdir -p /app/extensions /data \
    && chown app /data
COPY --from=build /opt/venv /opt/venv
COPY deploy/agent.yaml /etc/apcore-a2a/agent.yaml
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    A2A_HOST=0.0.0.0 \
    A2A_PORT=8000
WORKDIR /app
USER 10001
EXPOSE 8000
VOLUME ["/data"]
# python is PID 1 and handles SIGTERM itself: it stops accepting, drains running tasks
# within the shutdown timeout (20 s in deploy/agent.yaml) and exits 0; it is gone at most
# shutdown_timeout + 3 s + shutdown_force_timeout (5 s) later, 28 s: give `docker stop -t`
# more than that (its default is 10 s; compose: stop_grace_period).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(f\"http://127.0.0.1:{os.environ.get('A2A_PORT', '8000')}/health\", timeout=4)"]
ENTRYPOINT ["apcore-a2a"]
CMD ["serve", "--config", "/etc/apcore-a2a/agent.yaml"]
