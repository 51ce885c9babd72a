"""The human A/B queue of a pairwise run (#13.3): two answers to an item side by side, sides
randomised per item (seeded, recorded on the vote), model names hidden, the judge's verdict
hidden until the person has chosen; keys 1 / 2 / 3 for left, right, tie. Pairs whose judge
verdict flipped with the order come first: people settle what the judge could not."""

import time

from django.contrib import messages
from django.db import IntegrityError, transaction
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from apps.accounts.access import AppRequest, reviewer_required
from apps.datasets.conversations import Bubble
from apps.datasets.models import Item
from apps.datasets.values import as_text, prompt_inputs
from apps.judges.models import Comparison
from apps.judges.pairwise import outcomes
from apps.review.dialogues import dialogue_of
from apps.review.models import Vote, a_on_left
from apps.runs.models import Response, Run

Unit = tuple[int, int, int]  # item, a, b


def _run(run_id: int) -> Run:
    runs = Run.objects.filter(kind=Run.Kind.PAIRWISE).select_related(
        "task", "dataset", "judged_with__judge"
    )
    return get_object_or_404(runs, pk=run_id)


def queue(run: Run) -> list[Unit]:
    """Every (item, pair): those whose judge verdict flipped with the order first, then the
    rest, each part in item order."""
    flipped = {(o.item_id, o.a, o.b) for o in outcomes(run) if not o.consistent}
    positions = dict(Item.objects.filter(dataset_id=run.dataset_id).values_list("pk", "position"))
    units = [
        (item, a, b)
        for item in sorted(positions, key=positions.__getitem__)
        for a, b in run.pairwise.pairs()
    ]
    return sorted(units, key=lambda u: (u not in flipped, positions[u[0]]))


def next_unit(run: Run, user_id: int, after: Unit | None = None) -> Unit | None:
    """The first unit after `after` (or from the start) that this person has not voted on."""
    done = set(
        Vote.objects.filter(run=run, user_id=user_id).values_list("item_id", "a_run_id", "b_run_id")
    )
    units = queue(run)
    start = units.index(after) + 1 if after in units else 0
    for unit in units[start:] + units[:start]:
        if unit not in done and unit != after:
            return unit
    return None


def unit_url(run: Run, unit: Unit) -> str:
    return reverse("review:ab-item", args=[run.pk, *unit])


@require_GET
def ab_start(request: AppRequest, run_id: int) -> HttpResponse:
    run = _run(run_id)
    found = next_unit(run, request.user.pk)
    if found is None:
        messages.info(request, "You have compared every pair of this run.")
        return redirect(run)
    return redirect(unit_url(run, found))


@require_GET
def ab_item(request: AppRequest, run_id: int, item_id: int, a: int, b: int) -> HttpResponse:
    run = _run(run_id)
    if (a, b) not in run.pairwise.pairs():
        raise Http404("Not a pair of this run.")
    item = get_object_or_404(Item, pk=item_id, dataset_id=run.dataset_id)
    responses = {
        r.run_id: r
        for r in Response.objects.filter(item=item, run_id__in=[a, b], epoch=0).select_related(
            "run", "item"
        )
    }
    left_is_a = a_on_left(run.pk, item.pk, a, b)
    mine = Vote.objects.filter(
        run=run, item=item, a_run_id=a, b_run_id=b, user=request.user
    ).first()
    # People who vote see the judge and the names only once they have chosen.
    revealed = mine is not None or not request.user.can_edit
    # Two dialogues side by side where the item is a conversation; else the two answers.
    sides = [_side(run_id, responses.get(run_id)) for run_id in (a, b)]
    if not left_is_a:
        sides.reverse()
    context = {
        "run": run,
        "item": item,
        "unit": (item.pk, a, b),
        "left": sides[0],
        "right": sides[1],
        "left_is_a": left_is_a,
        "inputs": _inputs(run, item),
        "mine": mine,
        "revealed": revealed,
        "names": dict(Run.objects.filter(pk__in=[a, b]).values_list("pk", "label")),
        "judge": list(
            Comparison.objects.filter(run=run, item=item, a_run_id=a, b_run_id=b).order_by("order")
        )
        if revealed
        else [],
        "shown_at": time.time(),
    }
    return render(request, "review/ab_item.html", context)


def _side(run_id: int, response: Response | None) -> tuple[int, str, list[Bubble]]:
    if response is None:
        return (run_id, "", [])
    return (run_id, response.text, dialogue_of(response))


def _inputs(run: Run, item: Item) -> list[tuple[str, str]]:
    """The item's inputs; without a mapping, every field but answers, reference and tags."""
    dataset = run.dataset
    hidden = set(dataset.hidden_columns)
    if item.is_conversation and dataset.conversation_column:
        hidden.add(dataset.conversation_column)  # each side's dialogue shows it, turn by turn
    inputs = prompt_inputs(item.fields or {}, dataset.input_columns, hidden)
    return [(name, as_text(value)) for name, value in inputs.items()]


@require_POST
@reviewer_required
def ab_vote(request: AppRequest, run_id: int, item_id: int, a: int, b: int) -> HttpResponse:
    run = _run(run_id)
    if (a, b) not in run.pairwise.pairs():
        raise Http404("Not a pair of this run.")
    item = get_object_or_404(Item, pk=item_id, dataset_id=run.dataset_id)
    side = request.POST.get("side", "")
    left_is_a = a_on_left(run.pk, item.pk, a, b)
    choice = {
        "left": Vote.Choice.A if left_is_a else Vote.Choice.B,
        "right": Vote.Choice.B if left_is_a else Vote.Choice.A,
        "tie": Vote.Choice.TIE,
    }.get(side)
    if choice is None:
        messages.error(request, "Choose left (1), right (2) or a tie (3).")
        return redirect(unit_url(run, (item.pk, a, b)))
    try:
        shown_at = float(request.POST.get("shown_at") or 0)
    except ValueError:
        shown_at = 0.0
    try:
        with transaction.atomic():
            Vote.objects.create(
                run=run,
                item=item,
                a_run_id=a,
                b_run_id=b,
                user=request.user,
                a_on_left=left_is_a,
                choice=choice,
                reason=(request.POST.get("reason") or "").strip()[:5000],
                seconds=min(max(time.time() - shown_at, 0.0), 4 * 3600) if shown_at else 0.0,
            )
    except IntegrityError:
        messages.info(request, "You had chosen on this pair already; your first choice stands.")
    return redirect(unit_url(run, (item.pk, a, b)))


@require_GET
def ab_next(request: AppRequest, run_id: int, item_id: int, a: int, b: int) -> HttpResponse:
    run = _run(run_id)
    found = next_unit(run, request.user.pk, (item_id, a, b))
    if found is None:
        messages.info(request, "You have compared every pair of this run.")
        return redirect(unit_url(run, (item_id, a, b)))
    return redirect(unit_url(run, found))
