"""The users' install against an OpenAI-compatible server this project did not write: the
LiteLLM proxy (its own venv, .venv-litellm, built by bin/test), with mock models that answer
without any provider. Our loopback server is shaped by what our code expects; this one is not
(its own ids, usage counts, headers and error bodies)."""

import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.base import ROOT, free_port
from tests.install.conftest import ADMIN, Install
from tests.install.web import WebSession, counters, wait_for_run

LITELLM = ROOT / ".venv-litellm" / "bin" / "litellm"
MASTER_KEY = "sk-litellm-master-key-for-the-install-stage"
CONFIG = """\
model_list:
  - model_name: answer-model
    litellm_params:
      model: openai/answer-model
      mock_response: "The answer is B."
  - model_name: grader-model
    litellm_params:
      model: openai/grader-model
      mock_response: '{"correctness": 4, "reason": "Names the right option."}'
general_settings:
  master_key: %s
"""


@pytest.fixture(scope="module")
def litellm_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not LITELLM.exists():
        pytest.fail(f"{LITELLM} is missing: bin/test builds it (setup_python litellm)")
    workdir: Path = tmp_path_factory.mktemp("litellm")
    (workdir / "config.yaml").write_text(CONFIG % MASTER_KEY)
    port = free_port()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(workdir),
        # Its price table from the package, not from the internet (there is none here).
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    with (workdir / "litellm.log").open("w") as log:
        proc = subprocess.Popen(
            [str(LITELLM), "--config", "config.yaml", "--host", "127.0.0.1", "--port", str(port)],
            cwd=workdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health/liveliness", timeout=5):
                    break
            except (urllib.error.URLError, ConnectionError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        "LiteLLM did not start:\n" + (workdir / "litellm.log").read_text()[-3000:]
                    )
                time.sleep(0.5)
        yield f"{url}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def add_endpoint(web: WebSession, name: str, base_url: str, model: str) -> str:
    """Create the endpoint and press its Test connection; returns what the page said."""
    form = web.get("/runs/endpoints/new/").form()
    listed = web.submit(form, name=name, base_url=base_url, model=model, new_api_key=MASTER_KEY)
    row = next(row for row in listed.text.split("<tr") if f">{name}<" in row)
    action = re.search(r'action="([^"]*/endpoints/\d+/test/)"', row).group(1)
    tested = web.submit(listed.form(action))
    message = re.search(r'role="status">([^<]*)<', tested.text)
    assert message, tested.text_only()
    return message.group(1)


def test_generation_and_llm_judge_runs_complete_against_litellm(install: Install, litellm_url: str):
    web = WebSession(install.url)
    web.login(*ADMIN)
    assert add_endpoint(web, "litellm-answers", litellm_url, "answer-model").startswith(
        "litellm-answers: Connected: answer-model answered “The answer is B.”"
    )
    assert add_endpoint(web, "litellm-grader", litellm_url, "grader-model").startswith(
        "litellm-grader: Connected: grader-model answered"
    )

    form = web.get("/runs/prompts/new/?task=demo-mcq").form()
    web.submit(form, name="litellm-letter", user_message="{{ question }} A. {{ A }} B. {{ B }}")
    form = web.get("/runs/new/generation/?task=demo-mcq").form("/start/")
    form.choose("dataset", "general-knowledge-mcq")
    form.choose("endpoint", "litellm-answers")
    form.choose("template", "litellm-letter")
    generation = wait_for_run(web, web.submit(form, label="via-litellm").url)
    assert 'data-status="completed"' in generation.text, generation.text_only()
    assert counters(generation) == (12, 0, 12)
    # LiteLLM's own usage counts reached the run.
    assert re.search(r"Completion tokens [1-9]\d*", generation.text_only())

    form = web.get("/judges/new/?task=demo-mcq").form()
    form.choose("kind", "LLM rubric")
    judge = web.submit(form, name="litellm-correctness", subjects_text="correctness 1 5")
    form = judge.form("/start/")
    form.choose("responses", "via-litellm")
    form.choose("endpoint", "litellm-grader")
    judged = wait_for_run(web, web.submit(form).url)
    assert 'data-status="completed"' in judged.text, judged.text_only()
    assert counters(judged) == (12, 0, 12)
    run_id = re.search(r"/runs/(\d+)/$", judged.url).group(1)
    results = web.get(f"/judges/runs/{run_id}/results/").text_only()
    assert re.search(r"correctness .*?4\.00", results), results[:2000]
