"""Lifecycle signals of runs, for the apps later in the flow (judges, leaderboards) to react to
without the runs app knowing them (as NetBox's job runner does)."""

from django.dispatch import Signal

# Sent once when a run completes its work (completed, or completed with failures), in the
# process that settled it (usually a worker), with `run=` the Run. Receivers must be quick and
# must not assume a request; one that raises is logged and does not fail the run.
run_finished = Signal()

# Sent after each commit of a run's results (a chunk's flush, a batch poll's answers), in the
# process and thread that wrote them, with `run=` the Run and `progress=` what the commit added
# (apps.runs.engine.contract.Progress). For rules that watch results as they arrive (a
# comparison that stops a run once it has decided: apps.leaderboards.stopping). Receivers must
# be quick (they delay the run's next commit); one that raises is logged and does not fail it.
results_written = Signal()

# Sent once when a run ends without completing its work: it failed as a whole (`run.status`
# failed, the cause in `run.failure_cause`) or was cancelled (by a person, or by itself:
# `run.stop_reason`, e.g. `run.stopped_by_budget`), from the model method that ended it, with
# `run=` the Run. Same
# rules as run_finished: quick receivers, and one that raises is logged and ignored.
run_stopped = Signal()
