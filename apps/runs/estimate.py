"""What a run will cost before it starts (#16.5): tokens and price, with and without the Batch
API's price and the response cache.

The run's plug-in renders the real requests, exactly as its chunks would (an unsaved `Run`
through `prepare` and `load_units`, then `planned_requests`), for at most `SAMPLE` units
spread evenly over the dataset; a bigger dataset is scaled up from them, so the start form
stays fast whatever the size. For each request:

- prompt tokens: `estimate_prompt_tokens`, the rate limits' estimate (ceil(ASCII characters
  / 4) + one per other character, + 4 per message + 3 for the reply: apps.runs.engine.limits);
- completion tokens: the request's max_tokens, else `COMPLETION_TOKENS_GUESS` (256) — an
  upper bound, since a reply may stop sooner; a later turn of a conversation holds the earlier
  answers, each counted the same (`answer_stand_in`), or as cached where the cache has it;
- cached: its `cache_key` is looked up in the cache table, so requests already answered are
  counted exactly (over the sample, then scaled), and cost $0 "with cache".

Prices are `Endpoint.cost` (with `batch=True`: the Batch API's share, BATCH_PRICE_FACTOR);
None when the model has no price. Requests to another endpoint (a simulated user's) are in the
totals and priced at that endpoint's price (`Estimate.others`); the price is unknown when
either has none.
"""

from dataclasses import dataclass, field
from typing import Any

from apps.runs.engine import cache
from apps.runs.engine.contract import plugin_for
from apps.runs.engine.llm import cache_key, chat_body, completion_allowance, estimate_prompt_tokens
from apps.runs.engine.tuning import COMPLETION_TOKENS_GUESS
from apps.runs.models import Endpoint, Run

SAMPLE = 200  # units rendered at most; more are scaled up from these


@dataclass
class Share:
    """What one endpoint other than the run's is sent (a simulated user's), scaled like the
    totals, which include it."""

    endpoint: Endpoint
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0

    def tokens(self, cached: bool) -> tuple[int, int]:
        if cached:
            return (
                self.prompt_tokens - self.cached_prompt_tokens,
                self.completion_tokens - self.cached_completion_tokens,
            )
        return self.prompt_tokens, self.completion_tokens


@dataclass
class Estimate:
    endpoint: Endpoint | None
    use_cache: bool
    units: int  # of the whole run
    sampled: int  # units rendered
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_requests: int = 0
    cached_prompt_tokens: int = 0
    cached_completion_tokens: int = 0
    default_completion: bool = False  # some request has no max_tokens: 256 assumed
    others: list[Share] = field(default_factory=list)

    @property
    def scaled(self) -> bool:
        return self.sampled < self.units

    @property
    def price_known(self) -> bool:
        return self.endpoint is not None and self.unpriced is None

    @property
    def unpriced(self) -> Endpoint | None:
        """An endpoint of the estimate without a price (whose hint the form shows), or None."""
        for endpoint in [self.endpoint, *(share.endpoint for share in self.others)]:
            if endpoint is not None and not endpoint.has_price:
                return endpoint
        return None

    @property
    def default_completion_tokens(self) -> int:
        return COMPLETION_TOKENS_GUESS

    @property
    def uncached_prompt_tokens(self) -> int:
        return self.prompt_tokens - self.cached_prompt_tokens

    @property
    def uncached_completion_tokens(self) -> int:
        return self.completion_tokens - self.cached_completion_tokens

    def price(self, *, batch: bool = False, cached: bool = False) -> float | None:
        if self.endpoint is None or not self.price_known:
            return None
        prompt, completion = self.prompt_tokens, self.completion_tokens
        if cached:
            prompt, completion = self.uncached_prompt_tokens, self.uncached_completion_tokens
        price = 0.0
        for share in self.others:
            theirs = share.tokens(cached)
            prompt, completion = prompt - theirs[0], completion - theirs[1]
            price += share.endpoint.cost(*theirs, batch=batch)
        return price + self.endpoint.cost(prompt, completion, batch=batch)

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The four prices the start form shows."""
        rows = []
        for name, batch, cached in (
            ("As sent", False, False),
            ("With batch", True, False),
            ("With cache", False, True),
            ("Batch and cache", True, True),
        ):
            prompt = self.uncached_prompt_tokens if cached else self.prompt_tokens
            completion = self.uncached_completion_tokens if cached else self.completion_tokens
            requests = self.requests - self.cached_requests if cached else self.requests
            rows.append(
                {
                    "name": name,
                    "requests": requests,
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "price": self.price(batch=batch, cached=cached),
                }
            )
        return rows


def estimate(run: Run, sample: int = SAMPLE) -> Estimate:
    """The estimate for an unsaved run as a start form would create it."""
    plugin = plugin_for(run)
    endpoint = run.endpoint
    keys, units = plugin.sample_keys(run, sample)
    found = Estimate(endpoint, run.use_cache, units, len(keys))
    if endpoint is None or not keys:
        return found
    ctx = plugin.prepare(run)
    planned = [
        (request, chat_body(request.endpoint or endpoint, request.messages, **request.params))
        for unit in plugin.load_units(run, ctx, keys)
        for request in plugin.planned_requests(run, ctx, unit)
    ]
    request_keys = [
        cache_key(request.endpoint or endpoint, body, epoch=request.epoch, round=request.round)
        for request, body in planned
    ]
    hits = cache.lookup(request_keys)
    prompt = completion = hit_prompt = hit_completion = hit_count = 0
    others: dict[int, Share] = {}
    for (request, body), key in zip(planned, request_keys, strict=True):
        tokens_in = estimate_prompt_tokens(request.messages)
        tokens_out = completion_allowance(body)
        found.default_completion |= tokens_out == COMPLETION_TOKENS_GUESS and not (
            body.get("max_tokens") or body.get("max_completion_tokens")
        )
        prompt, completion = prompt + tokens_in, completion + tokens_out
        hit = key in hits
        if hit:
            hit_count += 1
            hit_prompt, hit_completion = hit_prompt + tokens_in, hit_completion + tokens_out
        if request.endpoint is not None and request.endpoint.pk != endpoint.pk:
            share = others.setdefault(request.endpoint.pk, Share(request.endpoint))
            share.requests += 1
            share.prompt_tokens += tokens_in
            share.completion_tokens += tokens_out
            share.cached_prompt_tokens += tokens_in if hit else 0
            share.cached_completion_tokens += tokens_out if hit else 0
    scale = units / len(keys)
    for share in others.values():
        share.requests = round(share.requests * scale)
        share.prompt_tokens = round(share.prompt_tokens * scale)
        share.completion_tokens = round(share.completion_tokens * scale)
        share.cached_prompt_tokens = round(share.cached_prompt_tokens * scale)
        share.cached_completion_tokens = round(share.cached_completion_tokens * scale)
    found.others = list(others.values())
    found.requests = round(len(planned) * scale)
    found.prompt_tokens = round(prompt * scale)
    found.completion_tokens = round(completion * scale)
    found.cached_requests = round(hit_count * scale)
    found.cached_prompt_tokens = round(hit_prompt * scale)
    found.cached_completion_tokens = round(hit_completion * scale)
    return found


def answer_stand_in(run: Run, params: dict[str, Any]) -> str:
    """An answer not known before the run, where a later turn's request holds it (multi-turn
    runs, memory scripts): a text the prompt estimate counts as long as the reply itself is
    counted, its completion allowance (max_tokens, else `COMPLETION_TOKENS_GUESS`), so each
    later turn's growing context is priced at the same upper bound as the answers."""
    endpoint = run.endpoint
    allowance = (
        completion_allowance(chat_body(endpoint, [], **params))
        if endpoint is not None
        else COMPLETION_TOKENS_GUESS
    )
    return "x" * (4 * allowance)  # ceil(characters / 4) tokens: exactly the allowance


def cached_answer(
    run: Run, messages: list[dict[str, str]], params: dict[str, Any], epoch: int
) -> str | None:
    """The cached reply to this request, which the run would get back as its answer (so the
    next turn's request is known exactly), or None."""
    if run.endpoint is None:
        return None
    key = cache_key(run.endpoint, chat_body(run.endpoint, messages, **params), epoch=epoch)
    hit = cache.lookup([key]).get(key)
    return None if hit is None else str(hit["content"])


def evenly_spaced(ids: list[int], n: int) -> list[int]:
    """At most `n` of `ids`, evenly spaced (all of them when there are few)."""
    if len(ids) <= n:
        return ids
    step = len(ids) / n
    return [ids[int(i * step)] for i in range(n)]
