"""Lifecycle signals of datasets, for the apps later in the flow to react to."""

from django.dispatch import Signal

# Sent after the transaction that stored a dataset's items commits (status ready), with
# `dataset=` the Dataset; a receiver that raises is logged and does not undo the import. A
# receiver returns what it started (a list of one-line descriptions, or None), which the
# upload's message names.
dataset_imported = Signal()
