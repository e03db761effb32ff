"""Queue ``vault``: write what the database knows into the vault (``vault generate``)."""

from shared.jobs.runner import run_step
from shared.vault.generate import GENERATE_STEP, run_generate_step
from workers.celery_app import app


@app.task(name="vault.run")
def run(job_id: str) -> None:
    """Run the generate step of a vault job."""
    run_step(GENERATE_STEP, job_id, run_generate_step)
