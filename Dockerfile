# syntax=docker/dockerfile:1.7
#
# mcp-hub container image.
#
#   docker build -t mcp-hub .                      # slim: Python upstreams only (~150 MB)
#   docker build -t mcp-hub:node --target with-node .   # + Node.js 22 for npx upstreams (~+120 MB)
#   docker build --build-arg UPSTREAM_PACKAGES="mcp-server-time mcp-server-git" -t mcp-hub .
#
#   docker run -d -p 8765:8765 -e MCP_HUB_TOKEN="$(openssl rand -hex 32)" \
#     -v "$PWD/servers.toml:/config/servers.toml:ro" mcp-hub
#
# The hub serves Streamable HTTP (/mcp), SSE (/sse) and the status page (/) on
# 0.0.0.0:8765 and refuses to start unless the config sets auth tokens: the
# shipped /config/servers.toml takes its token from $MCP_HUB_TOKEN. A config
# you mount over it must keep `[hub.http] auth_tokens = ["${MCP_HUB_TOKEN}"]`.
# See docs/deployment.md.

ARG PYTHON_VERSION=3.12
ARG NODE_VERSION=22

# ----------------------------------------------------------------------------- builder
FROM python:${PYTHON_VERSION}-slim-bookworm AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/mcp-hub
COPY pyproject.toml README.md requirements.lock ./
COPY mcp_hub ./mcp_hub
COPY builtin_tools ./builtin_tools
# Build the wheel, then install it (and only it, with its dependencies at the versions
# of requirements.lock) into the venv.
RUN python -m pip wheel --no-deps --wheel-dir /wheels . \
 && /opt/mcp-hub/bin/pip install -c requirements.lock /wheels/*.whl
# Python upstream servers to bake in, e.g. "mcp-server-time mcp-server-git" (pin them).
ARG UPSTREAM_PACKAGES=""
# hadolint ignore=SC2086
RUN if [ -n "${UPSTREAM_PACKAGES}" ]; then /opt/mcp-hub/bin/pip install ${UPSTREAM_PACKAGES}; fi

# ----------------------------------------------------------------------------- runtime
FROM python:${PYTHON_VERSION}-slim-bookworm AS runtime
LABEL org.opencontainers.image.title="mcp-hub" \
      org.opencontainers.image.description="One MCP server in front of many" \
      org.opencontainers.image.licenses="MIT"
# tini as PID 1: forwards SIGTERM to the hub and reaps orphans of stdio upstreams
# (npx → node: the hub ends the whole process group, tini collects what is left).
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini=0.19.0-1+b3 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 mcphub \
 && useradd --system --uid 10001 --gid mcphub --home-dir /home/mcphub --create-home \
      --shell /usr/sbin/nologin mcphub \
 && mkdir -p /config /state \
 && chown mcphub:mcphub /state
COPY --from=builder /opt/mcp-hub /opt/mcp-hub
# The default config: no upstreams, HTTP on all interfaces, token from the environment.
# Mount your own servers.toml over it (read-only is fine).
COPY <<"EOF" /config/servers.toml
# mcp-hub container config. Replace it: -v ./servers.toml:/config/servers.toml:ro
[hub]
state_dir = "/state"

[hub.http]
host = "0.0.0.0"
port = 8765
# MCP_HUB_TOKEN must be set (docker run -e / a Kubernetes Secret). A second,
# optional token lets you rotate without downtime; empty tokens are ignored.
auth_tokens = ["${MCP_HUB_TOKEN}", "${MCP_HUB_TOKEN_NEXT:-}"]
EOF

ENV PATH=/opt/mcp-hub/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    MCP_HUB_CONFIG=/config/servers.toml \
    HOME=/home/mcphub
USER 10001:10001
WORKDIR /home/mcphub
VOLUME ["/state"]
EXPOSE 8765
# /healthz is open (no token) and answers while the process serves.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request as u; sys.exit(u.urlopen('http://127.0.0.1:8765/healthz', timeout=4).status != 200)"]
ENTRYPOINT ["tini", "--", "mcp-hub"]
CMD ["serve", "--transport", "http", "--host", "0.0.0.0", "--port", "8765"]

# ----------------------------------------------------------------------------- with-node
# Node.js for upstreams started with npx (e.g. @modelcontextprotocol/server-everything).
# Trade-off: about 120 MB more, and npx fetches packages at start-up unless you
# install them into the image (RUN npm install -g PACKAGE@VERSION in a derived image).
FROM node:${NODE_VERSION}-bookworm-slim AS node

FROM runtime AS with-node
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules /usr/local/lib/node_modules
USER 0:0
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && node --version
USER 10001:10001
# npx caches packages here; keep it writable (an emptyDir when the root fs is read-only).
ENV NPM_CONFIG_CACHE=/tmp/.npm \
    NPM_CONFIG_UPDATE_NOTIFIER=false

# ----------------------------------------------------------------------------- default
# `docker build .` without --target builds the slim image.
FROM runtime AS slim
