"""Queue ``ingest``: collect and chunk documents."""

from shared.ingest.pipeline import run_ingest_step
from shared.jobs.runner import run_step
from workers.celery_app import app


@app.task(name="ingest.run")
def run(job_id: str) -> None:
    """Run the ingest step of a job."""
    run_step("ingest", job_id, run_ingest_step)
