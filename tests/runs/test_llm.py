"""The LLM client: retries, Retry-After, fatal errors, timeouts, plain-word messages."""

import asyncio

import pytest

from apps.runs.engine.errors import LLMError, Stopped
from apps.runs.engine.limits import EndpointSemaphore, RateLimiter, async_redis
from apps.runs.engine.llm import LLM, run_async, test_connection
from apps.runs.models import Endpoint, ErrorKind
from tests.base import free_port
from tests.runs.conftest import SECRET


def ask(endpoint: Endpoint, **kwargs) -> tuple[object, list]:
    """One chat through a fresh LLM; returns (reply or LLMError, attempt log)."""

    async def main():
        log: list = []
        llm = LLM(endpoint, slots=None, rate=None, stop=asyncio.Event(), **kwargs)
        try:
            return await asyncio.wait_for(
                llm.chat([{"role": "user", "content": "Hello"}], log=log, item_id=1), 60
            ), log
        except LLMError as exc:
            return exc, log
        finally:
            await llm.close()

    return run_async(main())


@pytest.mark.django_db
def test_a_reply_with_tokens_cost_and_parameters(endpoint, llm_server, settings):
    settings.PRICE_TABLE = {"test-model": [2.0, 8.0]}
    endpoint.temperature, endpoint.max_tokens, endpoint.seed = 0.2, 50, 7
    endpoint.extra_params = {"stop": ["END"]}
    reply, log = ask(endpoint)
    assert reply.text == "echo: Hello" and reply.finish_reason == "stop"
    assert (reply.prompt_tokens, reply.completion_tokens) == (1, 2)
    assert reply.cost == pytest.approx((1 * 2.0 + 2 * 8.0) / 1_000_000)
    assert [a.ok for a in log] == [True] and '"echo: Hello"' in log[0].raw_reply
    sent = llm_server.stats()["log"][0]
    assert sent["params"] == {"temperature": 0.2, "max_tokens": 50, "seed": 7, "stop": ["END"]}
    assert sent["key_last4"] == SECRET[-4:]


@pytest.mark.django_db
@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_transient_errors_are_retried_honouring_retry_after(endpoint, llm_server, status):
    llm_server.configure(fail_first_n=2, fail_first_status=status, retry_after=0.4)
    reply, log = ask(endpoint)
    assert reply.text == "echo: Hello" and reply.attempts == 3
    assert [a.ok for a in log] == [False, False, True]
    assert f"({status})" in log[0].error
    times = [entry["time"] for entry in llm_server.stats()["log"]]
    if status in (429, 503):  # the server sent Retry-After: 0.4
        assert times[1] - times[0] >= 0.39 and times[2] - times[1] >= 0.39


@pytest.mark.django_db
def test_retries_give_up_after_max_retries(endpoint, llm_server):
    llm_server.configure(error_rate={"500": 1.0})
    error, log = ask(endpoint, max_retries=2)
    assert isinstance(error, LLMError) and not error.fatal
    assert error.message.startswith("the server failed (500)")
    assert len(log) == 3 and llm_server.stats()["requests"] == 3


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("status", "words"),
    [
        (401, "the API key was refused (401)"),
        (403, "may not use this endpoint or model (403)"),
        (404, "model “test-model” not found"),
    ],
)
def test_auth_and_not_found_fail_fast_without_retry(endpoint, llm_server, status, words):
    llm_server.configure(script=[{"status": status}])
    error, log = ask(endpoint)
    assert isinstance(error, LLMError) and error.fatal
    assert words in error.message
    assert llm_server.stats()["requests"] == 1 and len(log) == 1


@pytest.mark.django_db
def test_a_body_that_is_not_json_is_retried_then_fails_with_its_raw_reply(endpoint, llm_server):
    llm_server.configure(garbage_rate=1.0)
    error, log = ask(endpoint, max_retries=1)
    assert error.kind == ErrorKind.API_ERROR and "not JSON" in error.message
    assert "502 Bad Gateway" in log[-1].raw_reply and len(log) == 2


@pytest.mark.django_db
def test_a_hanging_server_is_a_timeout_failure_not_a_hang(endpoint, llm_server):
    llm_server.configure(timeout_rate=1.0, hang_seconds=60)
    endpoint.timeout_seconds = 0.5
    error, log = ask(endpoint, max_retries=1)
    assert error.kind == ErrorKind.TIMEOUT and error.message == "no answer within 0.5 s"
    assert [a.error_kind for a in log] == [ErrorKind.TIMEOUT, ErrorKind.TIMEOUT]


@pytest.mark.django_db
def test_nothing_listening_is_said_in_plain_words(endpoint):
    endpoint.base_url = f"http://127.0.0.1:{free_port()}/v1"
    error, _ = ask(endpoint, max_retries=0)
    assert error.message == f"nothing answers at {endpoint.base_url}"


@pytest.mark.django_db
def test_test_connection_answers_in_plain_words(endpoint, llm_server):
    check = test_connection(endpoint)
    assert (
        check.ok and "test-model answered “echo: Reply with the single word OK.”" in check.message
    )
    llm_server.configure(require_key="sk-another-key")
    check = test_connection(endpoint)
    assert not check.ok and check.message.startswith("the API key was refused (401)")
    assert SECRET not in check.message
    endpoint.base_url = f"http://127.0.0.1:{free_port()}/v1"
    assert test_connection(endpoint).message.startswith("nothing answers at http://127.0.0.1:")


@pytest.mark.django_db
def test_the_key_is_scrubbed_from_everything_stored(endpoint, llm_server):
    llm_server.configure(script=[{"reply": f"your key is {SECRET}"}])
    reply, log = ask(endpoint)
    assert SECRET not in reply.raw and SECRET not in log[0].raw_reply
    assert "[api key]" in log[0].raw_reply


@pytest.mark.django_db
def test_a_stop_during_backoff_leaves_the_unit_pending(endpoint, llm_server):
    llm_server.configure(error_rate={"429": 1.0}, retry_after=30)

    async def main():
        stop = asyncio.Event()
        llm = LLM(endpoint, slots=None, rate=None, stop=stop)
        task = asyncio.create_task(llm.chat([{"role": "user", "content": "x"}], log=[], item_id=1))
        await asyncio.sleep(0.5)
        stop.set()
        try:
            await asyncio.wait_for(task, 5)
        finally:
            await llm.close()

    with pytest.raises(Stopped):
        run_async(main())


# ---- Redis limits ---------------------------------------------------------------------------
def test_the_semaphore_holds_across_clients_and_dead_leases_expire(redis_conn, monkeypatch):
    import apps.runs.engine.limits as limits

    async def main():
        a, b = async_redis(), async_redis()
        sem_a, sem_b = EndpointSemaphore(a, 99, 3), EndpointSemaphore(b, 99, 3)
        assert len(await sem_a.try_acquire(2)) == 2
        assert len(await sem_b.try_acquire(5)) == 1  # only one slot was left
        assert await sem_b.try_acquire(1) == []
        await sem_a.release(next(iter(sem_a.held)))
        assert len(await sem_b.try_acquire(1)) == 1
        # A holder that stops renewing (a killed worker) loses its leases when they expire.
        monkeypatch.setattr(limits, "SLOT_LEASE_SECONDS", 0.3)
        await sem_b.renew()
        await asyncio.sleep(0.4)
        assert len(await sem_a.try_acquire(3)) == 2  # b's two expired; a still holds one
        await a.aclose()
        await b.aclose()

    run_async(main())


def test_the_rate_limit_spaces_requests_across_clients(redis_conn):
    async def main():
        clients = [async_redis(), async_redis()]
        limiters = [RateLimiter(c, 7, rpm=600, burst=2) for c in clients]  # 10/s, burst 2
        loop = asyncio.get_running_loop()
        times = []

        async def go(limiter):
            for _ in range(5):
                await limiter.wait()
                times.append(loop.time())

        await asyncio.gather(*(go(limiter) for limiter in limiters))
        for c in clients:
            await c.aclose()
        return sorted(times)

    times = run_async(main())
    # Ten requests at 10/s with a burst of 2: the last may go no sooner than 0.8 s after the first.
    assert times[-1] - times[0] >= 0.75
    # Never more than burst + rate allows: any four span 0.3 s (0.2 s of them may be lost when
    # the loop is descheduled between a grant and its timestamp on a loaded machine; unlimited,
    # they span microseconds).
    for i in range(len(times) - 3):
        assert times[i + 3] - times[i] >= 0.1


def test_a_chunk_holds_no_more_than_its_share_of_the_limit(redis_conn):
    """Two chunks on one endpoint (limit 4): the first took every slot while alone; once its
    share is 2, each lease its requests release goes back to Redis until it holds 2, and the
    other chunk's waiting request gets one, not a lease kept for the first chunk's next."""
    from apps.runs.engine.slots import SlotPool

    async def main():
        a, b = async_redis(), async_redis()
        stop = asyncio.Event()
        first = SlotPool(EndpointSemaphore(a, 98, 4), stop)
        second = SlotPool(EndpointSemaphore(b, 98, 4), stop)
        leases = [await first.acquire() for _ in range(4)]
        assert len(first.semaphore.held) == 4
        waiting = asyncio.create_task(second.acquire())
        later = asyncio.create_task(first.acquire())  # the first chunk's next request
        await asyncio.sleep(0.2)
        assert not waiting.done()  # every slot is the first chunk's
        first.share = second.share = 2
        first.release(leases.pop())
        assert await asyncio.wait_for(waiting, 5)  # given back to Redis, taken by the other
        assert not later.done()  # the first chunk is at 3 > 2 and keeps no lease for itself
        first.release(leases.pop())  # back to Redis too: now at its share
        await asyncio.sleep(0.2)
        assert len(first.semaphore.held) == 2 and not later.done()
        first.release(leases.pop())  # at its share: straight to its own waiting request
        assert await asyncio.wait_for(later, 5)
        assert len(first.semaphore.held) == 2 and len(second.semaphore.held) == 1
        for pool in (first, second):
            await pool.trim(everything=True)
            await pool.semaphore.release_all()
        await a.aclose()
        await b.aclose()

    run_async(main())
