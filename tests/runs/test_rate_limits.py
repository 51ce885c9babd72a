"""Provider rate limits: the token estimate, OpenAI's headers, and the RPM/TPM budgets in Redis
shared by every process (apps.runs.engine.limits), pinned to hand-computed numbers."""

import asyncio
import json
import subprocess
import sys
import textwrap
import uuid

import pytest
from django.urls import reverse

from apps.runs.engine.limits import (
    COMPLETION_TOKENS_GUESS,
    RateLimiter,
    account_scope,
    async_redis,
    completion_budget,
    learned_key,
    parse_duration,
    prompt_tokens,
    request_tokens,
    spent_for,
    text_tokens,
)
from apps.runs.engine.llm import LLM, Attempt, run_async
from tests.base import ROOT


# ---- the estimate ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("Answer briefly.", 4),  # 15 ASCII characters: ceil(15 / 4)
        ("Q: What is 2 + 2?", 5),  # 17 characters
        ("答案是B", 4),  # three CJK characters count one each, "B" a quarter rounded up
        ("café", 2),  # ceil(3 / 4) + one for "é"
    ],
)
def test_text_tokens_are_a_quarter_of_ascii_characters_and_one_per_other(text, tokens):
    assert text_tokens(text) == tokens


def test_a_request_costs_its_prompt_estimate_plus_max_tokens():
    messages = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Q: What is 2 + 2?"},
    ]
    # (4 + 4) + (5 + 4) + 3 for the reply's priming.
    assert prompt_tokens(messages) == 20
    assert request_tokens(messages, 50) == 70
    assert request_tokens(messages, None) == 20 + COMPLETION_TOKENS_GUESS == 276
    parts = [{"role": "user", "content": [{"type": "text", "text": "Answer briefly."}]}]
    assert prompt_tokens(parts) == 4 + 4 + 3
    assert completion_budget({"max_tokens": 64}) == 64
    assert completion_budget({"max_completion_tokens": 32, "max_tokens": 64}) == 32
    assert completion_budget({"temperature": 0}) is None
    assert completion_budget({"max_tokens": True}) is None


def test_the_estimate_reserves_more_than_the_loopback_server_counts():
    """The test server counts words; long English words are ~1.7 estimated tokens each here."""
    from tests.llm_server import _words

    prose = (
        "The committee reviewed every proposal submitted before the deadline and published "
        "its decisions, with reasons, on the first working day of the following month."
    )
    assert len(prose) == 159 and _words(prose) == 24 and text_tokens(prose) == 40


# ---- what providers say ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("20ms", 0.02),
        ("59.612s", 59.612),
        ("1h2m3.5s", 3723.5),
        ("150µs", 0.00015),
        ("2", 2.0),
        ("0.5", 0.5),
        ("", None),
        ("soon", None),
        ("1x", None),
        ("-1", None),
        ("1s later", None),
        (None, None),
    ],
)
def test_reset_durations_in_openai_and_plain_formats(value, seconds):
    parsed = parse_duration(value)
    assert parsed == (pytest.approx(seconds) if seconds is not None else None)


def test_headers_saying_the_budget_is_spent_give_the_wait_for_one_more_request():
    spent = {
        "x-ratelimit-limit-requests": "600",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "1m0s",  # 600 requests come back over a minute
    }
    assert spent_for(spent, 100) == pytest.approx(0.1)  # one of them: 60 s / 600
    tokens = {
        "x-ratelimit-limit-tokens": "60000",
        "x-ratelimit-remaining-tokens": "100",
        "x-ratelimit-reset-tokens": "30s",
    }
    assert spent_for(tokens, 400) == pytest.approx(30 * 300 / 59900)
    assert spent_for(tokens, 100) == 0.0  # it fits
    assert spent_for({**spent, **tokens}, 400) == pytest.approx(0.15025, abs=1e-5)
    no_limit = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2s"}
    assert spent_for(no_limit, 1) == 2.0  # without the limit: the whole reset
    assert spent_for({"x-ratelimit-remaining-requests": "0"}, 1) == 0.0  # no reset: no guess
    assert spent_for({}, 1) == 0.0


# ---- the budgets in Redis, shared by processes ------------------------------------------------
SPENDER = textwrap.dedent(
    """
    import asyncio, json, sys, time
    import redis.asyncio
    from apps.runs.engine.limits import RateLimiter

    async def main(url, tries, tokens, rpm, tpm, ready):
        client = redis.asyncio.Redis.from_url(url)
        limiter = RateLimiter(client, 42, rpm, rpm, tpm=tpm, token_burst=tpm)
        # Both processes start spending together, however long each took to start.
        await client.incr(ready)
        while int(await client.get(ready)) < 2:
            await asyncio.sleep(0.01)
        tries_ = []
        for _ in range(tries):
            asked = time.time()
            tries_.append([await limiter.try_spend(tokens), asked])
        await client.aclose()
        print(json.dumps(tries_))

    url, tries, tokens, rpm, tpm, ready = sys.argv[1:]
    asyncio.run(main(url, int(tries), int(tokens), int(rpm) or None, int(tpm) or None, ready))
    """
)


def spend_in_processes(url: str, tries: int, tokens: int, rpm: int = 0, tpm: int = 0) -> list:
    """Two processes at once, each trying `tries` requests without waiting: [wait, asked at]."""
    ready = f"test:spenders-ready:{uuid.uuid4().hex}"
    args = [sys.executable, "-c", SPENDER, url, str(tries), str(tokens), str(rpm), str(tpm), ready]
    procs = [subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, text=True) for _ in "ab"]
    out = []
    for proc in procs:
        stdout, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        out.extend(json.loads(stdout))
    return out


def assert_waits_for_one_back(tries: list, seconds: float) -> None:
    """Every refused try waits until one request's share comes back: `seconds` after the
    budget was spent (the earliest try), less the time that had passed when it asked."""
    spent_at = min(asked for _, asked in tries)
    refused = [(w, asked) for w, asked in tries if w > 0]
    assert len(refused) == 4
    for wait, asked in refused:
        assert seconds - (asked - spent_at) - 0.5 < wait <= seconds, (wait, asked - spent_at)


def test_the_token_budget_is_shared_by_two_processes(redis_server):
    # 600 tokens a minute, all of them at once: six requests of 100 tokens, whoever asks.
    tries = spend_in_processes(redis_server, 5, 100, tpm=600)
    assert sum(1 for w, _ in tries if w == 0) == 6
    # The seventh waits for its 100 tokens to come back: 100 × 60 s / 600 = 10 s from when the
    # budget was spent, less the time since (a loaded machine may delay a process's next try).
    assert_waits_for_one_back(tries, 10.0)


def test_the_request_budget_is_shared_by_two_processes(redis_server):
    tries = spend_in_processes(redis_server, 5, 0, rpm=6)
    assert sum(1 for w, _ in tries if w == 0) == 6
    assert_waits_for_one_back(tries, 10.0)  # one request: 60 s / 6


def test_one_call_spends_both_budgets_or_neither_and_settling_corrects_tokens(redis_conn):
    async def main():
        client = async_redis()
        both = RateLimiter(client, 5, 2, 2, tpm=600, token_burst=600)
        tokens_only = RateLimiter(client, 5, tpm=600, token_burst=600)
        assert [await both.try_spend(100) for _ in range(2)] == [0.0, 0.0]
        refused = await both.try_spend(100)  # the requests budget is spent…
        assert 29.0 < refused <= 30.0  # (one of 2 a minute comes back in 30 s)
        # …so its 100 tokens were not: 400 of 600 are left for the same endpoint.
        spent = [await tokens_only.try_spend(100) for _ in range(5)]
        assert spent[:4] == [0.0] * 4 and spent[4] > 0
        # A request that used 40 of the 100 tokens it reserved gives 60 back: a 60-token
        # request fits now, a 100-token one still does not.
        await tokens_only.settle(100, 40)
        assert await tokens_only.try_spend(100) > 0
        assert await tokens_only.try_spend(60) == 0.0
        # And one that used more than reserved is charged the difference.
        await tokens_only.settle(0, 600)
        assert await tokens_only.try_spend(1) > 55
        await client.aclose()

    run_async(main())


def test_a_pause_holds_every_limiter_of_the_endpoint(redis_conn):
    async def main():
        client = async_redis()
        limited = RateLimiter(client, 6, 6000, 10)
        unlimited = RateLimiter(client, 6)  # no RPM/TPM: the heartbeat tells it
        other_endpoint = RateLimiter(client, 7, 6000, 10)
        await limited.pause(5)
        assert 4.5 < await limited.try_spend() <= 5.0
        assert await other_endpoint.try_spend() == 0.0
        unlimited.note_pause(await client.pttl(unlimited.pause_key))
        stop = asyncio.Event()
        waiter = asyncio.create_task(unlimited.wait(stop))
        await asyncio.sleep(0.3)
        assert not waiter.done()  # still paused
        stop.set()
        assert await waiter is False
        await limited.pause(1)  # a shorter pause does not cut a longer one short
        assert await client.pttl(limited.pause_key) > 4000
        await client.aclose()

    run_async(main())


def test_aimd_paces_to_what_was_answered_then_cuts_once_per_429_and_ramps_back(redis_conn):
    """The AIMD controller of a provider that states no limits, pinned by hand: its state is
    set in Redis to times in the past (Redis's clock), so nothing here waits for time to pass.
    Decrease 0.9, ramp 60 s, top 2x (apps.runs.engine.tuning)."""
    from apps.runs.engine.tuning import AIMD_DECREASE, AIMD_RAMP, AIMD_TOP

    assert (AIMD_DECREASE, AIMD_RAMP, AIMD_TOP) == (0.9, 60.0, 2.0)

    async def main():
        client = async_redis()
        rate = RateLimiter(client, "account:test")
        other = RateLimiter(client, "account:test")  # another worker
        now = int((await client.time())[0])
        assert not rate.shared
        await rate.cut(0)  # nothing answered yet: nothing to pace by
        assert rate.pace is None and not rate.shared
        # 90 answered over the last minute (counted for longer than that).
        for _ in range(92):
            rate.note_sent()
        rate.note_sent(refused=True)
        rate.note_sent(refused=True)
        await rate.sync()
        await client.hset(rate.answered_key, "since", now - 120)
        await rate.cut(0)
        first = (rate.pace, rate.epoch, rate.shared)
        await other.cut(0)  # sent before that cut: says nothing new
        await other.sync()
        seen = (other.pace, other.epoch)
        # 30 s later the pace has grown by 30 × 0.1 × 90 / 60 = 4.5: 94.5.
        await client.hset(rate.pace_key, "at", now - 30)
        await rate.sync()
        grown = rate.pace
        await rate.cut(rate.epoch)  # 0.9 × 94.5 = 85.05, under the 90 answered
        cut = (rate.pace, rate.epoch)
        await client.hset(rate.pace_key, "at", now - 100_000)
        await rate.sync()
        top = rate.pace  # never past twice the last cut
        # Requests go out one every 60 / 85.05 s, no burst.
        await client.hset(rate.pace_key, "at", now)
        waits = [await rate.try_spend() for _ in range(2)]
        # A pace far above what the provider answered is cut to that count at once.
        await client.hset(rate.pace_key, mapping={"rpm": 1000, "top": 2000, "step": 0})
        await rate.cut(rate.epoch)
        capped = rate.pace
        # A run counted for 5 s: 40 answered is 480 a minute.
        young = RateLimiter(client, "account:young")
        await client.hset(young.answered_key, mapping={str(now): 40, "since": now - 5})
        await young.cut(0)
        # The same count, but the 429 says to retry after 55 s: the provider's window, a
        # minute, holds those 40 (a sliding window filled in a burst), so 40 a minute.
        told = RateLimiter(client, "account:told")
        await client.hset(told.answered_key, mapping={str(now): 40, "since": now - 5})
        await told.cut(0, retry_after=55)
        # A retry-after that with the run's age makes less than half a minute says nothing of
        # a minute's window: 40 in 5 s is 480 a minute, as without it.
        brief = RateLimiter(client, "account:brief")
        await client.hset(brief.answered_key, mapping={str(now): 40, "since": now - 5})
        await brief.cut(0, retry_after=6)
        await client.aclose()
        return first, seen, grown, cut, top, waits, capped, young.pace, told.pace, brief.pace

    first, seen, grown, cut, top, waits, capped, young, told, brief = run_async(main())
    assert first == (90.0, 1, True)
    # The other worker reads the cut, grown by the ramp over the moments since (0.15 a second).
    assert seen[1] == 1 and 90.0 <= seen[0] < 90.5
    assert 94.5 <= grown < 95  # (less than 3 s of the test's own time: 0.15 a second)
    assert 85.05 <= cut[0] < 85.5 and cut[1] == 2
    assert top == pytest.approx(2 * cut[0], abs=0.01)
    assert waits[0] == 0.0 and 0.6 < waits[1] <= 60 / cut[0]
    assert capped == 90.0  # min(0.9 × 1000, the 90 answered in the last minute)
    # 40 × 60 / 5 = 480, over the 5 s and the test's own time until the cut (Redis's clock).
    assert 5 <= 40 * 60 / young < 8
    assert told == pytest.approx(40, abs=0.01)  # min(60, 5 + 55 + the test's time) s
    assert 5 <= 40 * 60 / brief < 8


@pytest.mark.django_db
def test_headers_saying_the_budget_is_spent_pause_everyone(endpoint, llm_server):
    """The server allows 3 requests a minute; the endpoint does not know. Three workers send
    one request each, at once (before any has read the limit from a reply): the third reply
    says none remain (reset ≈ 60 s, 3 a minute), and every worker waits ≈ 60 / 3 = 20 s."""
    llm_server.configure(rpm=3)

    async def main():
        client = async_redis()
        stop = asyncio.Event()
        for i in range(3):
            rate = RateLimiter.for_endpoint(client, endpoint)
            assert not rate.shared
            llm = LLM(endpoint, slots=None, rate=rate, stop=stop)
            await llm.chat([{"role": "user", "content": f"q{i}"}], log=[], item_id=1)
            await llm.close()
        other_worker = RateLimiter(client, account_scope(endpoint), 6000, 10)
        wait = await other_worker.try_spend()
        await client.aclose()
        return wait, rate.paused_until

    wait, _ = run_async(main())
    assert 15.0 < wait <= 20.0
    stats = llm_server.stats(log=False)
    assert stats["requests"] == 3 and stats["rate_limited"] == 0


@pytest.mark.django_db
def test_limits_the_provider_states_pace_every_worker(endpoint, llm_server):
    """An endpoint saved without limits, a provider that states 120 RPM and 6,000 TPM in its
    headers: the first reply makes the limiter pace to them (a burst of 2 given back: 60 / 119
    s apart), every other worker reads them from Redis, the lower of the endpoint's and the
    provider's counts, and they lapse when nobody has seen them for a while."""
    llm_server.configure(rpm=120, tpm=6000)

    async def main():
        client = async_redis()
        rate = RateLimiter.for_endpoint(client, endpoint)
        assert not rate.shared and rate.limits() == (None, None)
        llm = LLM(endpoint, slots=None, rate=rate, stop=asyncio.Event())
        await llm.chat([{"role": "user", "content": "q"}], log=[], item_id=1)
        await llm.close()
        seen = (rate.shared, rate.limits(), rate.interval_us, rate.burst)
        stored = await client.get(rate.learned_key)
        ttl = await client.ttl(rate.learned_key)
        other = RateLimiter.for_endpoint(client, endpoint)
        await other.load_learned()
        # Spending: two at once (the burst), the third 60 / 119 s later.
        waits = [await other.try_spend(10) for _ in range(3)]
        endpoint.rpm_limit = 60  # the endpoint says less than the provider: 60 it is
        stricter = RateLimiter.for_endpoint(client, endpoint)
        await stricter.load_learned()
        lower = stricter.limits()
        stricter.read_learned(None)  # lapsed: back to the endpoint's own
        lapsed = (stricter.limits(), stricter.token_us)
        await client.aclose()
        return seen, stored, ttl, other.limits(), waits, lower, lapsed

    seen, stored, ttl, other, waits, lower, lapsed = run_async(main())
    assert seen == (True, (120, 6000), int(60_000_000 / 119), 2)
    assert stored == b"120 6000" and 590 < ttl <= 600
    assert other == (120, 6000)
    assert waits[:2] == [0.0, 0.0] and 0.3 < waits[2] <= 60 / 119  # less the time spent asking
    assert lower == (60, 6000)
    assert lapsed == ((60, None), 0.0)


@pytest.mark.django_db
def test_limits_are_kept_per_account_of_base_url_model_and_key(endpoint, redis_conn):
    """Endpoints count against one account when they share the base URL (its host's case and a
    trailing slash aside), the model and the key, whatever else they send; the scope is a
    hash that holds no part of the key."""
    from apps.runs.engine.limits import provider_limits
    from apps.runs.models import Endpoint

    def other(name: str, **changes) -> Endpoint:
        fields = {
            "base_url": endpoint.base_url,
            "model": endpoint.model,
            "api_key_secret": endpoint.api_key_secret,
            **changes,
        }
        return Endpoint.objects.create(name=name, **fields)

    host = endpoint.base_url.split("//", 1)[1].split("/", 1)[0]
    same = other("same", base_url=endpoint.base_url.replace(host, host.upper()) + "/", seed=1)
    scope = account_scope(endpoint)
    assert scope.startswith("account:") and len(scope) == len("account:") + 32
    assert account_scope(same) == scope
    assert endpoint.api_key_secret not in scope
    others = [
        other("key", api_key_secret="sk-another-key"),
        other("model", model="other-model"),
        other("url", base_url=endpoint.base_url + "/other"),
    ]
    assert all(account_scope(each) != scope for each in others)
    # The environment's key counts when none is stored, like the one sent.
    env_key = other("env", api_key_secret="", api_key_env="EVALSITE_TEST_KEY")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVALSITE_TEST_KEY", endpoint.api_key_secret)
        assert account_scope(env_key) == scope
    redis_conn.set(learned_key(scope), "120 0")
    told = provider_limits([endpoint, same, *others])
    assert [told[each.pk] for each in (endpoint, same, *others)] == [(120, None)] * 2 + [
        (None, None)
    ] * 3


@pytest.mark.django_db
def test_the_endpoint_list_shows_the_limits_the_provider_states(admin_client, endpoint, redis_conn):
    redis = redis_conn
    endpoint.rpm_limit = 500
    endpoint.save()
    page = admin_client.get(reverse("runs:endpoint-list")).content.decode()
    assert "provider:" not in page
    redis.set(learned_key(account_scope(endpoint)), "120 60000")
    page = admin_client.get(reverse("runs:endpoint-list")).content.decode()
    assert "provider: 120" in page and "provider: 60000" in page and ">500<" in page


@pytest.mark.django_db
def test_a_chunk_paced_by_the_providers_limits_gets_the_time_for_it(endpoint, redis_conn):
    """RQ's limit for a chunk counts the provider's stated limits like the endpoint's own:
    1,000 requests at 6 a minute are 10 s each, with the 1.5 margin and 120 s."""
    from apps.runs.engine.chunk import chunk_timeout
    from apps.runs.models import Run

    endpoint.timeout_seconds, endpoint.max_retries = 10, 1
    run = Run(endpoint=endpoint, chunk_size=10)
    assert chunk_timeout(run, lanes=10, units=1000) == 600
    redis_conn.set(learned_key(account_scope(endpoint)), "6 0")
    assert chunk_timeout(run, lanes=10, units=1000) == 1000 * 10 * 1.5 + 120


@pytest.mark.django_db
def test_a_429_pauses_everyone_for_its_retry_after_and_gives_its_tokens_back(endpoint, llm_server):
    endpoint.tpm_limit = 6000
    endpoint.max_tokens = 50
    endpoint.save()
    llm_server.configure(script=[{"match": "first", "status": 429, "times": 1, "retry_after": 4}])

    async def main():
        client = async_redis()
        stop = asyncio.Event()
        rate = RateLimiter.for_endpoint(client, endpoint)
        llm = LLM(endpoint, slots=None, rate=rate, stop=stop, max_retries=0)
        log: list[Attempt] = []
        with pytest.raises(Exception, match="rate limited"):
            await llm.chat([{"role": "user", "content": "first"}], log=log, item_id=1)
        await llm.close()
        pttl = await client.pttl(rate.pause_key)
        # Refunded: the token budget is as if nothing had been sent.
        tat = await client.get(rate.tokens_key)
        seconds, micros = await client.time()
        await client.aclose()
        return pttl, int(tat) - (seconds * 1_000_000 + micros)

    pttl, ahead_us = run_async(main())
    assert 3000 < pttl <= 4000
    assert ahead_us <= 0


# ---- the endpoint form ----------------------------------------------------------------------------
@pytest.mark.django_db
def test_the_endpoint_form_takes_both_limits_and_the_list_shows_them(admin_client):
    from django.urls import reverse

    from apps.runs.models import Endpoint
    from tests.runs.test_views import ENDPOINT_POST

    url = reverse("runs:endpoint-create")
    refused = admin_client.post(url, {**ENDPOINT_POST, "rpm_limit": 600, "tpm_limit": 0})
    assert refused.status_code == 200 and not Endpoint.objects.exists()
    assert "greater than or equal to 1" in refused.content.decode()
    form = admin_client.get(url).content.decode()
    assert (
        'name="tpm_limit"' in form and "Tokens per minute (blank: as the provider states)" in form
    )
    saved = admin_client.post(url, {**ENDPOINT_POST, "rpm_limit": 600, "tpm_limit": 60000})
    assert saved.status_code == 302
    endpoint = Endpoint.objects.get()
    assert (endpoint.rpm_limit, endpoint.tpm_limit) == (600, 60000)
    listing = admin_client.get(reverse("runs:endpoint-list")).content.decode()
    assert '<th class="num">TPM</th>' in listing and '<td class="num">60000</td>' in listing
    # Held so that no minute ever holds more: the bursts (a second's requests but no more than
    # the 4 in flight; a second of tokens) are given back from the rates: 597 and 59,000.
    limiter = RateLimiter.for_endpoint(async_redis(), endpoint)
    assert (limiter.interval_us, limiter.burst) == (60_000_000 // 597, 4)
    assert (limiter.token_us, limiter.token_burst) == (pytest.approx(60_000_000 / 59_000), 1000)
    assert limiter.shared


def test_a_chunk_may_take_as_long_as_the_whole_launch_at_the_limits():
    """A chunk shares the endpoint's pace with every other chunk: RQ must not cut it short."""
    from apps.runs.engine.chunk import chunk_timeout
    from apps.runs.models import Endpoint, Run

    endpoint = Endpoint(timeout_seconds=10, max_retries=1)
    run = Run(endpoint=endpoint, chunk_size=10)
    unpaced = chunk_timeout(run, lanes=10, units=1000)
    assert unpaced == 600  # one wave of (10 + 5) × 2 + 30 s, under the ten-minute floor
    endpoint.rpm_limit = 6  # 1,000 requests at 10 s each, with the 1.5 margin and 120 s
    assert chunk_timeout(run, lanes=10, units=1000) == 1000 * 10 * 1.5 + 120
    endpoint.rpm_limit, endpoint.tpm_limit, endpoint.max_tokens = None, 60_000, 1000
    # (1000 + 2000 assumed prompt tokens) a request at 1,000 tokens a second: 3 s each.
    assert chunk_timeout(run, lanes=10, units=1000) == 1000 * 3 * 1.5 + 120
    assert chunk_timeout(run, lanes=10, units=100_000) == 24 * 3600  # RQ's ceiling
