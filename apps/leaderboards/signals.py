"""Signals of leaderboards, for the apps later in the flow to react to."""

from django.dispatch import Signal

# Sent when the release gate reached a verdict (`gate.compare`: `manage.py gate`, the API's
# POST /api/v1/gate/), with `gate=` the Gate. A receiver that raises is logged and does not
# change the verdict.
gate_decided = Signal()
