"""The old home of batch mode's jobs, now apps.runs.engine.batch.

RQ stores a job as the dotted path of its function, and bin/run keeps Redis's dump across
restarts, so submit and poll jobs enqueued before the move may still be queued under these
paths: they must stay importable. Nothing else imports this module.
"""

from apps.runs.engine.batch import poll_job as poll_job
from apps.runs.engine.batch import submit_job as submit_job
