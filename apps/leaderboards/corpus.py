"""Corpus-level metrics of a metric judge's runs, beside the per-item means (#29.12).

Corpus BLEU and macro-F1 are not means of per-item values, so they are computed from the texts
themselves: each item's response (the first epoch) post-processed as the judge says, against
its usable references. Their 95 % interval is a percentile bootstrap over items (RESAMPLES
seeded resamples, each recomputing the corpus metric). They use the judge's inputs only, so
reviewers' overrides do not change them; strict scoring counts an item without a response as
an empty one, answered only leaves it out, as the board's means do.

A judge's dataset metric plug-in (Judge.dataset_metric, apps/judges/plugins.py) takes the place
of the built-in one: called on the whole run's post-processed responses, references (its field
converter's where it has one) and items, and on each resample for the interval unless that
would take more than PLUGIN_BOOTSTRAP_CALLS item visits. A plug-in that raises leaves the
value out, with its error in the cell.
"""

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from apps.datasets.models import Item
from apps.datasets.values import as_text
from apps.judges import plugins
from apps.judges.judging import expand_references
from apps.judges.metrics import (
    CORPUS_METRICS,
    CorpusTable,
    MetricError,
    corpus_bootstrap,
    corpus_table,
    processed_references,
    usable_references,
)
from apps.judges.metrics import postprocess as apply_postprocess
from apps.judges.models import Judge
from apps.judges.scoring import JudgeSpec
from apps.leaderboards.memo import Memo, run_state
from apps.leaderboards.stats import RESAMPLES, SEED, Interval, percentile_ci
from apps.runs.models import Response, Run
from apps.runs.response_schema import judged_text


@dataclass(frozen=True)
class CorpusCell:
    name: str  # a CorpusMetric's name
    label: str
    value: float | None
    ci: Interval | None
    n: int  # items in the corpus
    left_out: int  # items without a usable reference (or, answered only, without a response)
    item_mean: float | None = None  # the board's per-item mean (judge-only), shown beside it
    note: str = ""  # a plug-in's: what it computes (its docstring's first paragraph)
    error: str = ""  # why there is no value (a plug-in that raised) or no interval


_cells: Memo[CorpusCell] = Memo("corpus metrics")


# Resamples × items a dataset metric plug-in is called on for its interval, at most.
PLUGIN_BOOTSTRAP_CALLS = 2_000_000


def has_corpus_metric(judge: Judge | None) -> bool:
    return (
        judge is not None
        and judge.kind == Judge.Kind.METRIC
        and (
            bool(judge.dataset_metric)
            or (judge.metric in CORPUS_METRICS and not JudgeSpec.of(judge).uses_plugins)
        )
    )


def predictions_of(run: Run) -> dict[int, str]:
    """item id → the text the judge scored (the first epoch's response, or the file's column)."""
    if run.source_run_id is None:
        rows = Item.objects.filter(dataset_id=run.dataset_id).values_list("pk", "fields")
        return {
            pk: as_text(value)
            for pk, fields in rows
            if (value := (fields or {}).get(run.source_column)) is not None
        }
    responses = Response.objects.filter(
        run_id=run.source_run_id, epoch=0, status=Response.Status.OK
    ).values_list("item_id", "text")
    schema = run.source_run.response_schema if run.source_run is not None else {}
    if not schema:
        return dict(responses)
    # What the judge scored: the schema's answer key; an invalid response counts as none.
    judged = {pk: judged_text(text, schema)[0] for pk, text in responses}
    return {pk: text for pk, text in judged.items() if text is not None}


def corpus_inputs(
    run: Run, judge: Judge, tag: str | None, strict: bool
) -> tuple[list[str], list[list[str]], int]:
    """Predictions and references of the run's items (with `tag`), and how many were left out."""
    items = Item.objects.filter(dataset_id=run.dataset_id).tagged(tag or "").order_by("position")
    found = predictions_of(run)
    predictions: list[str] = []
    references: list[list[str]] = []
    left_out = 0
    for pk, reference in items.values_list("pk", "reference"):
        try:
            refs = usable_references(expand_references(reference or ""))
        except MetricError:
            refs = []
        prediction = found.get(pk)
        if not refs or (prediction is None and not strict):
            left_out += 1
            continue
        if judge.postprocess_reference:
            try:
                refs = usable_references(processed_references(judge.postprocess or None, refs))
            except MetricError:
                left_out += 1
                continue
        predictions.append(apply_postprocess(judge.postprocess or None, prediction or ""))
        references.append(refs)
    return predictions, references, left_out


def corpus_cell(run: Run, judge: Judge, tag: str | None, scoring: str) -> CorpusCell:
    key = (run.pk, run_state(run), judge.pk, tag, scoring)
    if (cached := _cells.get(key)) is not None:
        return cached
    if judge.dataset_metric:
        return _cells.put(key, plugin_cell(run, judge, tag, scoring == "strict"))
    metric = CORPUS_METRICS[judge.metric]
    predictions, references, left_out = corpus_inputs(run, judge, tag, scoring == "strict")
    value: float | None = None
    ci: Interval | None = None
    if predictions:
        table = corpus_table(judge.metric, predictions, references, judge.metric_options)
        value = table.value(np.ones(table.n))
        ci = percentile_ci(corpus_bootstrap(table, RESAMPLES, SEED))
    cell = CorpusCell(metric.name, metric.display_name, value, ci, len(predictions), left_out)
    return _cells.put(key, cell)


class PluginTable(CorpusTable):
    """A dataset metric plug-in over the items drawn `counts` times each."""

    def __init__(
        self,
        name: str,
        predictions: list[str],
        references: list[list[str]],
        items: list[dict[str, Any]],
    ) -> None:
        self.name, self.n = name, len(predictions)
        self.predictions, self.references, self.items = predictions, references, items

    def value(self, counts: np.ndarray) -> float:
        drawn = np.repeat(np.arange(self.n), counts.astype(np.int64))
        return plugins.score_dataset(
            self.name,
            [self.predictions[i] for i in drawn],
            [self.references[i] for i in drawn],
            [plugins.item_copy(self.items[i]) for i in drawn],
        )


def plugin_cell(run: Run, judge: Judge, tag: str | None, strict: bool) -> CorpusCell:
    """The judge's dataset metric plug-in on the run's items (with `tag`): the first epoch's
    responses (strict: an item without one as ""), post-processed as the judge says, and the
    references as the judge reads them; an item whose converter or post-processor raises is
    left out."""
    try:
        plugin = plugins.registry().get(plugins.DATASET_METRIC, judge.dataset_metric)
    except plugins.PluginError as exc:
        return CorpusCell(
            judge.dataset_metric, judge.dataset_metric, None, None, 0, 0, error=str(exc)
        )
    items = Item.objects.filter(dataset_id=run.dataset_id).tagged(tag or "").order_by("position")
    found = predictions_of(run)
    predictions: list[str] = []
    references: list[list[str]] = []
    rows: list[dict[str, Any]] = []
    left_out = 0
    for pk, reference, fields in items.values_list("pk", "reference", "fields"):
        prediction = found.get(pk)
        if prediction is None and not strict:
            left_out += 1
            continue
        try:
            refs = plugins.references_of(
                judge.converter, fields, expand_references(reference or "")
            )
            text = plugins.process(judge.postprocess, prediction or "")
            if judge.postprocess_reference:
                refs = [plugins.process(judge.postprocess, ref) for ref in refs]
        except (plugins.PluginRaised, plugins.PluginError, MetricError):
            left_out += 1
            continue
        predictions.append(text)
        references.append(refs)
        rows.append(dict(fields or {}))
    note = plugin.doc.split("\n\n")[0].replace("\n", " ")
    cell = CorpusCell(plugin.name, plugin.label, None, None, len(predictions), left_out, note=note)
    if not predictions:
        return cell
    table = PluginTable(plugin.name, predictions, references, rows)
    try:
        value = table.value(np.ones(table.n, dtype=np.int64))
    except plugins.PluginRaised as exc:
        return dataclasses.replace(cell, error=exc.message)
    if table.n * RESAMPLES > PLUGIN_BOOTSTRAP_CALLS:
        why = f"no interval: {RESAMPLES} resamples of {table.n} items would take too long"
        return dataclasses.replace(cell, value=value, error=why)
    try:
        ci = percentile_ci(corpus_bootstrap(table, RESAMPLES, SEED))
    except plugins.PluginRaised as exc:
        return dataclasses.replace(cell, value=value, error=f"no interval: {exc.message}")
    return dataclasses.replace(cell, value=value, ci=ci)
