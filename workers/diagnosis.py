"""Queue ``diagnosis``: signature, evidence, lessons and context for one CI log."""

from shared.diagnosis.job import DIAGNOSIS_STEP, run_diagnosis_step
from shared.jobs.runner import run_step
from workers.celery_app import app


@app.task(name="diagnosis.run")
def run(job_id: str) -> None:
    """Run the diagnosis step of a job."""
    run_step(DIAGNOSIS_STEP, job_id, run_diagnosis_step)
