"""Corpus-level metrics of a metric judge's runs, beside the per-item means (#29.12).

Corpus BLEU and macro-F1 are not means of per-item values, so they are computed from the texts
themselves: each item's response (the first epoch) post-processed as the judge says, against
its usable references. Their 95 % interval is a percentile bootstrap over items (RESAMPLES
seeded resamples, each recomputing the corpus metric). They use the judge's inputs only, so
reviewers' overrides do not change them; strict scoring counts an item without a response as
an empty one, answered only leaves it out, as the board's means do.
"""

from dataclasses import dataclass

import numpy as np

from apps.datasets.models import Item
from apps.datasets.values import as_text
from apps.judges.judging import expand_references
from apps.judges.metrics import (
    CORPUS_METRICS,
    MetricError,
    corpus_bootstrap,
    corpus_table,
    processed_references,
    usable_references,
)
from apps.judges.metrics import postprocess as apply_postprocess
from apps.judges.models import Judge
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


_cells: Memo[CorpusCell] = Memo("corpus metrics")


def has_corpus_metric(judge: Judge | None) -> bool:
    return judge is not None and judge.kind == Judge.Kind.METRIC and judge.metric in CORPUS_METRICS


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
