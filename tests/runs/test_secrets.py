"""Issue #10: a provider or gateway that echoes the API key in an error must not put the key
anywhere evalsite stores, shows, exports or logs. The LLM client scrubs every string it lets
out; these tests check the scrubber itself, then scan everything after real runs."""

import asyncio
import io
import json
import logging
import subprocess
import sys

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from apps.judges.models import Score
from apps.runs.engine.errors import LLMError
from apps.runs.engine.llm import LLM, run_async, test_connection
from apps.runs.engine.scrub import SCRUBBED, Scrubber
from apps.runs.models import Endpoint, Run
from tests.base import ROOT, subprocess_env
from tests.factories import make_judge, make_qa_dataset, rubric_reply
from tests.llm_server import masked_key
from tests.runs.conftest import SECRET

ENV_KEY = "sk-env-7Qx2LmP9vR4tZ8wK3c"


def leaks(text: str, keys: tuple[str, ...] = (SECRET, ENV_KEY)) -> list[str]:
    """The key, any 8 characters of it in a row, or its masked form, wherever found."""
    found = []
    for key in keys:
        pieces = {key, masked_key(key), *(key[i : i + 8] for i in range(len(key) - 7))}
        found += [piece for piece in pieces if piece in text]
    return found


# ---- the scrubber ------------------------------------------------------------------------
def test_the_key_goes_whole_or_in_the_masked_form_a_provider_shows_in_errors():
    scrub = Scrubber([SECRET])
    for text in (
        f"Incorrect API key provided: {SECRET}.",
        f'{{"error": {{"message": "bad key", "key": "{SECRET}"}}}}',
        f"key={SECRET}&model=x",
        f"prefix{SECRET}suffix",
    ):
        assert SECRET not in scrub(text) and SCRUBBED in scrub(text), text
    assert scrub(f"a {SECRET} and {SECRET}") == f"a {SCRUBBED} and {SCRUBBED}"
    # OpenAI's 401 shows the key's start and end around stars; others use dots or an ellipsis.
    # (Error text only: no model can answer with a masked form of a key it never saw.)
    for masked in (
        masked_key(SECRET),
        f"{SECRET[:8]}{'*' * 36}{SECRET[-4:]}",
        f"{SECRET[:3]}...{SECRET[-3:]}",
        f"{SECRET[:6]}…{SECRET[-4:]}",
        f"{SECRET[:10]}...",
        f"...{SECRET[-6:]}",
    ):
        text = f"Incorrect API key provided: {masked}. You can find your key online."
        expected = f"Incorrect API key provided: {SCRUBBED}. You can find your key online."
        assert scrub.error(text) == expected
    # Text that only looks a little like a key stays as it was.
    scrub = Scrubber([SECRET, ENV_KEY, "", "no-key-configured"])
    for text in (
        "",
        "Loading... done. 5 * 3 = 15; ***bold*** text…",
        "Incorrect API key provided: sk-abc***...wxyz (not ours).",
        "the connection to http://127.0.0.1:8000/v1 failed: Cannot connect to host",
        "答案是B……",
        "sk-test-" + "x" * 40,  # our key's prefix is shared by many keys: not enough alone
    ):
        assert scrub(text) == text and scrub.error(text) == text
    # A key is text, not a pattern.
    key = "k+y.(a|b)*[c]?\\d{2}"
    assert Scrubber([key])(f"got {key} here, not kyyy.a") == f"got {SCRUBBED} here, not kyyy.a"


def test_error_text_also_loses_a_cut_off_key_and_any_echoed_bearer_credential():
    scrub = Scrubber([SECRET])
    # A key cut short by a length limit, or split at a separator.
    assert scrub.error(f"unauthorized: {SECRET[:12]}") == f"unauthorized: {SCRUBBED}"
    assert leaks(scrub.error(f"token {SECRET[:14]}/{SECRET[14:]}")) == []
    for header in (f"Bearer {SECRET}", "bearer sk-someone-elses-key", "Bearer x"):
        error = scrub.error(f"{{'authorization': '{header}', 'host': 'api'}}")
        assert error == f"{{'authorization': '{header.split()[0]} {SCRUBBED}', 'host': 'api'}}"
    # A model's reply is its answer: a word that is part of the key, or an answer about HTTP
    # headers, stays; only our key itself goes.
    assert scrub(f"unauthorized: {SECRET[:12]}") == f"unauthorized: {SECRET[:12]}"
    reply = "Send the header `Authorization: Bearer YOUR_API_KEY` with every request."
    assert scrub(reply) == reply
    assert scrub(f"Bearer {SECRET}") == f"Bearer {SCRUBBED}"


def test_short_keys_do_not_eat_the_message():
    text = "a request was refused: the key abcd is not valid for gpt-4o; try again..."
    # Shorter than four characters: nothing to recognise but an echoed header.
    assert Scrubber(["a"])(text) == text
    assert Scrubber(["a"]).error("Authorization: Bearer a") == f"Authorization: Bearer {SCRUBBED}"
    # Four to seven: only where it stands as a word of its own.
    assert Scrubber(["abcd"])(text) == text.replace(" abcd ", f" {SCRUBBED} ")
    assert Scrubber(["gpt"])(text) == text
    assert Scrubber(["abcd"])("abcdef and xabcd stay") == "abcdef and xabcd stay"


# ---- the client's edge -------------------------------------------------------------------
def ask(endpoint: Endpoint) -> tuple[LLMError, list]:
    async def main():
        log: list = []
        llm = LLM(endpoint, slots=None, rate=None, stop=asyncio.Event(), max_retries=1)
        try:
            await llm.chat([{"role": "user", "content": "Hello"}], log=log, item_id=1)
        except LLMError as exc:
            return exc, log
        finally:
            await llm.close()
        raise AssertionError("the request did not fail")

    return run_async(main())


@pytest.mark.django_db
@pytest.mark.parametrize("status", [401, 500])
def test_errors_leave_the_client_scrubbed(endpoint, llm_server, status):
    llm_server.configure(echo_auth=True, script=[{"status": status}])
    error, log = ask(endpoint)
    assert SCRUBBED in error.message and SCRUBBED in error.raw
    texts = [error.message, str(error), error.raw]
    texts += [text for a in log for text in (a.error, a.raw_reply, a.traceback)]
    assert leaks("\n".join(texts)) == []
    assert len(log) == (1 if status == 401 else 2)


@pytest.mark.django_db
def test_the_environment_key_is_scrubbed_too(endpoint, llm_server, monkeypatch):
    monkeypatch.setenv("EVALSITE_TEST_KEY", ENV_KEY)
    endpoint.api_key_secret, endpoint.api_key_env = "", "EVALSITE_TEST_KEY"
    llm_server.configure(echo_auth=True, script=[{"status": 500}])
    error, log = ask(endpoint)
    assert llm_server.stats()["log"][0]["key_last4"] == ENV_KEY[-4:]
    assert SCRUBBED in error.message
    assert leaks("\n".join([error.message, error.raw, *(a.traceback for a in log)])) == []
    # The stored key wins over the environment, and a reply never carries either.
    endpoint.api_key_secret = SECRET
    llm_server.configure(script=[{"reply": f"keys: {SECRET}, {ENV_KEY}, Bearer {SECRET}"}])
    reply, _ = run_async(_reply(endpoint))
    assert reply.text == f"keys: {SCRUBBED}, {SCRUBBED}, Bearer {SCRUBBED}"
    assert leaks(reply.raw) == []
    check = test_connection(endpoint)  # a reply is shown there in full
    assert check.ok and SCRUBBED in check.message and leaks(check.message) == []


async def _reply(endpoint: Endpoint):
    log: list = []
    llm = LLM(endpoint, slots=None, rate=None, stop=asyncio.Event())
    try:
        return await llm.chat([{"role": "user", "content": "Hi"}], log=log, item_id=1), log
    finally:
        await llm.close()


# ---- everything, after real runs -----------------------------------------------------------
def start_run(*args: str) -> subprocess.CompletedProcess:
    """`manage.py start_run ... --wait` in a process of its own, as a user would."""
    return subprocess.run(
        [sys.executable, "manage.py", "start_run", *args, "--wait", "--poll", "0.3"],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def body(response) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_echoed_key_is_nowhere_after_generation_and_judge_runs(
    task, endpoint, template, llm_server, workers, admin_user, viewer_user, monkeypatch, caplog
):
    caplog.set_level(logging.INFO)
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    endpoint.max_retries = 1
    endpoint.save()
    from_env = Endpoint.objects.create(
        name="from-env", base_url=llm_server.base_url, model="test-model", max_retries=1
    )
    dataset = make_qa_dataset(task, 4)
    make_judge(task, name="quality")
    worker = workers(OPENAI_API_KEY=ENV_KEY)
    outputs = []

    # A generation run where item 1 keeps failing with a 500 that quotes the key...
    llm_server.configure(echo_auth=True, script=[{"match": "What is 1 + 1?", "status": 500}])
    ran = start_run(
        "generation",
        *("--dataset", str(dataset.pk), "--endpoint", "local", "--template", "qa"),
        *("--logging", "all"),
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    outputs.append(ran.stdout + ran.stderr)
    generation = Run.objects.generation().get()
    # ...and a judge run over its responses where item 2's judging does.
    llm_server.configure(
        default_reply=rubric_reply(4, 4),
        script=[{"match": "What is 2 + 2?", "scope": "any", "status": 500}],
    )
    ran = start_run(
        "judge",
        *("--responses", str(generation.pk), "--judge", "quality", "--endpoint", "local"),
        *("--logging", "all"),
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    outputs.append(ran.stdout + ran.stderr)
    # Then a 401 quoting the key stops a run of each kind, one with the environment's key.
    llm_server.configure(require_key="sk-what-the-server-wants", script=[])
    ran = start_run(
        "generation",
        *("--dataset", str(dataset.pk), "--endpoint", "from-env", "--template", "qa"),
    )
    assert ran.returncode == 2 and "the API key was refused (401)" in ran.stderr, ran.stderr
    outputs.append(ran.stdout + ran.stderr)
    ran = start_run(
        "judge",
        *("--responses", str(generation.pk), "--judge", "quality", "--endpoint", "local"),
    )
    assert ran.returncode == 2 and "the API key was refused (401)" in ran.stderr, ran.stderr
    outputs.append(ran.stdout + ran.stderr)
    runs = list(Run.objects.order_by("pk"))
    assert [r.status for r in runs] == [
        Run.Status.COMPLETED_WITH_FAILURES,
        Run.Status.COMPLETED_WITH_FAILURES,
        Run.Status.FAILED,
        Run.Status.FAILED,
    ]
    # The provider did quote the keys: what it said arrived, scrubbed.
    assert all(SCRUBBED in r.error for r in runs[2:]), [r.error for r in runs]
    assert SCRUBBED in generation.responses.get(item__position=1).error
    assert Score.objects.filter(run=runs[1], item__position=2, error__contains=SCRUBBED).exists()
    sent = {entry["key_last4"] for entry in llm_server.stats()["log"]}
    assert {SECRET[-4:], ENV_KEY[-4:]} <= sent

    # Test connection, as the page shows it (HTMX) and as a message after a redirect.
    admin, viewer = Client(), Client()
    admin.force_login(admin_user)
    viewer.force_login(viewer_user)
    pages: dict[str, str] = {}
    for status in (401, 500):
        llm_server.configure(require_key=None, script=[{"status": status}])
        for ep in (endpoint, from_env):
            url = reverse("runs:endpoint-test", args=[ep.pk])
            shown = body(admin.post(url, HTTP_HX_REQUEST="true"))
            assert f"({status})" in shown and SCRUBBED in shown, shown
            pages[f"test {ep.name} {status}"] = shown
            pages[f"test {ep.name} {status} page"] = body(admin.post(url, follow=True))

    # Every page of every run, as admin and as viewer; every export.
    llm_server.configure(script=[])
    for run in runs:
        urls = [reverse("runs:detail", args=[run.pk])]
        urls += [reverse("runs:response-detail", args=[run.pk, i.pk]) for i in dataset.items.all()]
        if run.kind == Run.Kind.JUDGE:
            urls += [
                reverse("judges:results", args=[run.pk]),
                reverse("judges:failed", args=[run.pk]),
            ]
        urls += [
            reverse("leaderboards:run-export", args=[run.pk]) + f"?format={f}"
            for f in ("csv", "jsonl")
        ]
        for who, client in (("admin", admin), ("viewer", viewer)):
            for url in urls:
                response = client.get(url, follow=True)
                assert response.status_code == 200, (who, url)
                pages[f"{who} {url}"] = body(response)
    assert SCRUBBED in pages[f"viewer {reverse('runs:detail', args=[generation.pk])}"]

    # The database (but for the endpoints' own rows), the commands' output, the worker's logs.
    out = io.StringIO()
    apps = [
        "accounts",
        "datasets",
        "runs",
        "drafting",
        "judges",
        "review",
        "leaderboards",
        "sessions",
    ]
    call_command("dumpdata", *apps, "--exclude", "runs.endpoint", stdout=out)
    rows = json.loads(out.getvalue())
    assert {"runs.attemptlog", "judges.judgeround", "judges.score"} <= {r["model"] for r in rows}
    worker.terminate()
    worker_output = worker.communicate(timeout=30)[0]
    assert "run_chunk" in worker_output or "runs:" in worker_output, worker_output[-2000:]
    everything = {
        **pages,
        "database": out.getvalue(),
        **{f"start_run #{n}": text for n, text in enumerate(outputs)},
        "worker output": worker_output,
        "logging": caplog.text,
    }
    found = {where: leaks(text) for where, text in everything.items() if leaks(text)}
    assert found == {}
