# Tool Call Proxy in a container, beside vLLM's (deploy/compose.yaml runs the two together).
#
#   docker build -t toolcall-proxy .
#   docker run -d --stop-timeout 40 -p 127.0.0.1:8003:8003 \
#       -e TOOLCALL_PROXY_UPSTREAM=http://VLLM-HOST:8000 -e TOOLCALL_PROXY_API_KEYS=sk-your-key \
#       toolcall-proxy
#
# Ollama's clients (Home Assistant, VS Code Copilot, Open WebUI…) assume port 11434: add
#   -p 127.0.0.1:11434:11434 -e TOOLCALL_PROXY_OLLAMA_PORT=11434
# and the same app answers there too (off by default).
#
# (--stop-timeout 40: longer than gunicorn's graceful timeout, 30 s, so that a stop drains the
# turns still waiting on the model instead of cutting them.)
#
# Inside the container the proxy listens on 0.0.0.0 (the container's own loopback cannot be
# reached from outside it), so whoever reaches the published port reaches the GPU through it:
# set TOOLCALL_PROXY_API_KEYS (clients then send `Authorization: Bearer KEY`), and publish the
# port on 127.0.0.1 unless the LAN must reach it. The proxy warns at start when no key is set.
ARG PYTHON_VERSION=3.11
FROM python:${PYTHON_VERSION}-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# The exact versions of requirements.lock, each file checked against its hash; wheels only;
# and the Redis client (requirements-redis.lock), for a store shared by several instances.
COPY requirements.lock requirements-redis.lock ./
RUN pip install --require-hashes --only-binary=:all: -r requirements.lock -r requirements-redis.lock

COPY app.py ./
COPY proxy/ proxy/
COPY deploy/gunicorn.conf.py deploy/
RUN python -m compileall -q app.py proxy deploy \
    && useradd --system --user-group --uid 10001 --home-dir /nonexistent --no-create-home \
        --shell /usr/sbin/nologin toolcall-proxy \
    && mkdir -p -m 0700 /var/lib/toolcall-proxy && chown toolcall-proxy: /var/lib/toolcall-proxy

# The Responses API's kept answers (`store: true`, previous_response_id): the one place the
# proxy writes, a volume of its own (the rest of the container may be read-only).
ENV TOOLCALL_PROXY_RESPONSES_STORE_PATH=/var/lib/toolcall-proxy/responses.sqlite3
VOLUME /var/lib/toolcall-proxy

USER toolcall-proxy

# gunicorn with gevent workers (one per core the container may use; GUNICORN_WORKERS to set).
ENV TOOLCALL_PROXY_HOST=0.0.0.0 \
    TOOLCALL_PROXY_PORT=8003
EXPOSE 8003
# TOOLCALL_PROXY_OLLAMA_PORT=11434 serves the same app there too, for Ollama's clients.
EXPOSE 11434

HEALTHCHECK --interval=30s --timeout=10s --start-period=15s --retries=3 \
    CMD ["python", "app.py", "healthcheck"]

ENTRYPOINT ["python", "app.py"]
