# The sqlenv servers in one image. By default the OpenEnv server (WebSocket /ws, HTTP, /mcp
# JSON-RPC, and the /web page when switched on: see the README); the MCP streamable-HTTP server
# instead with
#   docker run -p 8000:8000 IMAGE sqlenv-mcp --transport http --host 0.0.0.0 --port 8000
# The embedded demo data is built in; serve Spider by mounting it:
#   docker run -p 8000:8000 -v /path/to/spider:/data/spider:ro -e SQLENV_DATA_DIR=/data/spider IMAGE
# This file never names the web page's switch: `openenv push` adds it for a Space only then.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GRADIO_ANALYTICS_ENABLED=False \
    HF_HUB_DISABLE_TELEMETRY=1 \
    SQLENV_CACHE_DIR=/home/sqlenv/cache

# Hugging Face Spaces run containers as uid 1000.
RUN useradd --create-home --uid 1000 sqlenv

WORKDIR /app
COPY pyproject.toml README.md LICENSE ./
COPY env_core ./env_core
COPY serving ./serving
COPY sqlenv_mcp ./sqlenv_mcp
COPY doors ./doors
COPY evals ./evals
# The project itself, from this tree, with every door and the evaluation harness (`sqlenv
# eval`); the training stack (torch) stays out. Dependencies are bounded in pyproject.toml.
# hadolint ignore=DL3013
RUN pip install --no-cache-dir ".[openenv,eval]"

USER 1000
# Build the demo databases and their answer keys now, so the first start is warm.
RUN python -c "from env_core.factory import open_manager; open_manager().shutdown()"

EXPOSE 8000
# Both servers answer /health (200 "healthy", 503 "unhealthy"). Checked every 5 s: Swarm
# (and OpenEnv's DockerSwarmProvider, which waits 30 s) sends a replica traffic only once a
# check has passed.
HEALTHCHECK --interval=5s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request as r; r.urlopen('http://127.0.0.1:8000/health', timeout=4)"]
CMD ["python", "-m", "doors.commands", "--host", "0.0.0.0", "--port", "8000"]
