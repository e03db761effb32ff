# The one image for every process: API, worker pools, beat, migrations.
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY api api
COPY workers workers
COPY shared shared
COPY cli cli
RUN pip install --no-cache-dir . gunicorn
RUN useradd --system --uid 10001 mem
USER mem
ENV MEM_DATA_DIR=/var/lib/mem
EXPOSE 8080
CMD ["gunicorn", "--bind", "0.0.0.0:8080", "--workers", "2", "--threads", "8", "api.wsgi:app"]
