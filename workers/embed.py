"""Queue ``embed``: turn chunks into vectors (CPU and memory heavy: give it its own pool)."""

from shared.ingest.pipeline import run_embed_step
from shared.jobs.runner import run_step
from workers.celery_app import app


@app.task(name="embed.run")
def run(job_id: str) -> None:
    """Run the embed step of a job."""
    run_step("embed", job_id, run_embed_step)
