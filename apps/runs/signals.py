"""Lifecycle signals of runs, for the apps later in the flow (judges, leaderboards) to react to
without the runs app knowing them (as NetBox's job runner does)."""

from django.dispatch import Signal

# Sent once when a run completes its work (completed, or completed with failures), in the
# process that settled it (usually a worker), with `run=` the Run. Receivers must be quick and
# must not assume a request; one that raises is logged and does not fail the run.
run_finished = Signal()
