"""Queue ``index``: write chunks to the lexical engine (I/O bound)."""

from shared.ingest.pipeline import run_index_step
from shared.jobs.runner import run_step
from workers.celery_app import app


@app.task(name="index.run")
def run(job_id: str) -> None:
    """Run the index step of a job."""
    run_step("index", job_id, run_index_step)
