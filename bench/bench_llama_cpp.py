"""Choice scoring against a real llama.cpp server (#26.5): llama-cpp-python's OpenAI-compatible
server, built from PyPI in its own venv (.venv-llama), serving a tiny llama model with random
weights and a real SentencePiece vocabulary that bench/llama_cpp_model.py writes.

It checks, and prints:
1. the server's quirks beside the loopback server's `llama_cpp` mode (tests/llm_server.py), which
   the CI tests use in its place: a list of prompts answered 500 with an empty message, echoed
   text_offset one character late, max_tokens 0 read as "no limit", a json_schema response
   format refused (json_object with a schema served);
2. a choice-scoring run made by evalsite's own code (create_choice_run: the probe, then an RQ
   worker scoring every item): either the picks, compared with what the tokens'
   log-probabilities imply, computed apart from the server with llama_cpp.Llama on the same
   model (context and context + option tokenized, the option's tokens' log-softmax summed), or
   the endpoint refused before any run, with the cause;
3. a judge with structured output on the server: every request after the first refused
   json_schema goes as json_object with the schema.
Exit status 0 only when everything agrees.

    .venv-test/bin/python bench/bench_llama_cpp.py [--build] [--items 12]

CI does not run this (building llama-cpp-python takes ~19 min on 2 busy cores, 4–6 when idle):
without .venv-llama it says how to build it and exits 0 (`bench/run` runs every bench), or
builds it first with --build (CMAKE_ARGS as below, into .venv-llama; takes minutes).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
LLAMA_VENV = ROOT / ".venv-llama"
LLAMA_PYTHON = LLAMA_VENV / "bin" / "python"
LLAMA_CPP_PYTHON = "llama-cpp-python[server]==0.3.36"
# No examples, tests or multimodal library: only what the server needs.
CMAKE_ARGS = "-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
N_CTX = 512
TOLERANCE = 1e-3  # per option's sum: the server and the reference evaluate in other batches

from bench.common import live_stack, wait_for_run  # noqa: E402
from tests.base import free_port  # noqa: E402

QUESTIONS = [
    ("Which planet is red?", ["Mars", "Venus", "Earth", "Jupiter"]),
    ("What animal barks?", ["dog", "cat", "bird", "fish"]),
    ("What is the capital of France?", ["Paris", "Rome", "Berlin", "Madrid"]),
    ("What colour is the sky?", ["blue", "green", "red", "yellow"]),
    ("Which is hot?", ["the Sun", "ice", "the Moon", "water"]),
    ("What animal meows?", ["a cat", "a dog", "a fish", "a bird"]),
    ("Which number is largest?", ["five", "one", "two", "three"]),
    ("What swims in the sea?", ["fish", "cat", "dog", "fox"]),
    ("Which city is the capital of the big star?", ["Paris", "no city", "Rome", "Berlin"]),
    ("What flies?", ["a bird", "a fish", "a rock", "water"]),
    ("Is the sky green?", ["no", "yes"]),
    ("What is cold?", ["ice", "fire", "the Sun", "hot water"]),
    ("Which fox is quick and brown?", ["The quick brown fox", "the lazy dog", "a cat"]),
    ("What jumps over the lazy dog?", ["the quick brown fox", "the Moon", "a fish"]),
]


def build_venv() -> float:
    """Make .venv-llama with llama-cpp-python[server] built from its sdist, and gguf; seconds."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(LLAMA_VENV)], check=True)
    env = {**os.environ, "CMAKE_ARGS": CMAKE_ARGS, "CMAKE_BUILD_PARALLEL_LEVEL": "2"}
    subprocess.run(
        [str(LLAMA_PYTHON), "-m", "pip", "install", "-q", LLAMA_CPP_PYTHON, "gguf"],
        check=True,
        env=env,
    )
    return time.monotonic() - started


def post(url: str, body: dict[str, Any], timeout: float = 120) -> tuple[int, Any]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw)
        except ValueError:
            return exc.code, raw.decode(errors="replace")


def start_server(model: Path, port: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            str(LLAMA_PYTHON), "-m", "llama_cpp.server", "--model", str(model),
            "--model_alias", "tiny", "--host", "127.0.0.1", "--port", str(port),
            "--n_ctx", str(N_CTX), "--n_threads", "2",
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the llama.cpp server exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                return proc
        except OSError:
            time.sleep(0.3)
    proc.terminate()
    raise SystemExit("the llama.cpp server did not answer within 120 s")


# ---- 1. the quirks, beside the loopback server's llama_cpp mode ----------------------------------
def quirks(base_url: str) -> dict[str, str]:
    """What the server at `base_url` does on each of the four quirks, in a few words."""
    from apps.runs.engine.llm import PromptLogprobs
    from apps.runs.kinds.choices import ScoringError, offset_shift

    found: dict[str, str] = {}
    prompt = "Q: Which planet is red?\nAnswer: Mars"
    status, body = post(
        f"{base_url}/completions",
        {"model": "tiny", "prompt": [prompt, prompt + "!"], "echo": True, "logprobs": 1,
         "max_tokens": 0},
    )  # fmt: skip
    found["a list of prompts"] = f"{status} {json.dumps(body)[:40]}"
    status, body = post(
        f"{base_url}/completions",
        {"model": "tiny", "prompt": [prompt], "echo": True, "logprobs": 1, "max_tokens": 1},
    )
    choice = body["choices"][0]
    echoed = PromptLogprobs(
        choice["text"],
        choice["logprobs"]["tokens"],
        choice["logprobs"]["token_logprobs"],
        choice["logprobs"]["text_offset"],
    )
    try:
        found["text_offset"] = f"off by {offset_shift(echoed)}"
    except ScoringError as exc:
        found["text_offset"] = str(exc)[:60]
    if echoed.tokens[0].startswith(" "):
        found["text_offset"] += ", 1st token with a space"
    status, body = post(
        f"{base_url}/completions",
        {"model": "tiny", "prompt": prompt, "echo": True, "logprobs": 1, "max_tokens": 0},
    )
    made = body["usage"]["completion_tokens"] if status == 200 else status
    found["max_tokens 0"] = "generates nothing" if made == 0 else "no limit (generates)"
    schema = {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]}
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "JSON"}], "max_tokens": 12}
    status, body = post(
        f"{base_url}/chat/completions",
        {**chat, "response_format": {"type": "json_schema",
                                     "json_schema": {"name": "s", "schema": schema}}},
    )  # fmt: skip
    message = body.get("error", {}).get("message", "") if isinstance(body, dict) else str(body)
    said = "Input should be 'text' or 'json_object'" in message
    found["json_schema"] = f"{status}{' quoting its validation error' if said else ''}"
    status, body = post(
        f"{base_url}/chat/completions",
        {**chat, "response_format": {"type": "json_object", "schema": schema}},
    )
    found["json_object + schema"] = str(status)
    return found


def compare_quirks(real_url: str, loopback_url: str) -> bool:
    real, loop = quirks(real_url), quirks(loopback_url)
    same = True
    print(f"{'':22} {'llama.cpp (real)':48} loopback llama_cpp mode")
    for name in real:
        a, b = real[name], loop[name]
        agree = a == b
        same = same and agree
        print(f"{name:22} {a:48} {b}  {'same' if agree else 'DIFFERENT'}")
    return same


# ---- 2. choice scoring --------------------------------------------------------------------------
def reference(model: Path, items: list[tuple[str, list[str]]]) -> list[list[float]]:
    """Each option's summed log-probability, computed with llama_cpp.Llama on the model (no
    server, no offsets): the option's tokens are those after the context's own tokens."""
    code = r"""
import json, sys
import numpy as np
from llama_cpp import Llama
llm = Llama(model_path=sys.argv[1], n_ctx=int(sys.argv[2]), logits_all=True, verbose=False)
out = []
for context, options in json.load(sys.stdin):
    head = llm.tokenize(context.encode(), add_bos=True)
    sums = []
    for option in options:
        tokens = llm.tokenize((context + " " + option).encode(), add_bos=True)
        assert tokens[: len(head)] == head, "the context's tokens change with the option"
        llm.reset()
        llm.eval(tokens)
        logits = np.array(llm.scores[: len(tokens)], dtype=np.float64)
        logits -= logits.max(axis=1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        sums.append(float(sum(logp[i - 1, tokens[i]] for i in range(len(head), len(tokens)))))
    out.append(sums)
print(json.dumps(out))
"""
    done = subprocess.run(
        [str(LLAMA_PYTHON), "-c", code, str(model), str(N_CTX)],
        input=json.dumps(items),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def score_choices(base_url: str, model: Path, count: int) -> bool:
    from apps.datasets.models import Dataset, Item, Task
    from apps.runs.kinds.choices import ChoiceRunError, choice_context, create_choice_run
    from apps.runs.models import ChoiceSetup, Endpoint, PromptTemplate, Response

    rows = (QUESTIONS * (count // len(QUESTIONS) + 1))[:count]
    task = Task.objects.create(slug="llama", name="llama.cpp")
    dataset = Dataset.objects.create(
        task=task, name="mc", format="csv", status="ready", row_count=len(rows),
        columns=["question", "options"], mapping={"input_columns": ["question"]},
    )  # fmt: skip
    Item.objects.bulk_create(
        Item(dataset=dataset, position=i, key=f"q{i}",
             fields={"question": q, "options": options}, reference="A")
        for i, (q, options) in enumerate(rows)
    )  # fmt: skip
    template = PromptTemplate.objects.create(
        task=task, name="mc", user_message="Q: {{ question }}\nAnswer:"
    )
    endpoint = Endpoint.objects.create(
        name="llama-cpp", base_url=base_url, model="tiny", concurrency_limit=2,
        timeout_seconds=120, max_retries=1, api_key_secret="sk-none",
    )  # fmt: skip
    started = time.monotonic()
    try:
        run = create_choice_run(
            dataset, endpoint, template, option_columns=["options"], logging_mode="all"
        )
    except ChoiceRunError as exc:
        print(f"refused before any run (in {time.monotonic() - started:.1f} s): {exc}")
        return True
    setup = ChoiceSetup.objects.get(run=run)
    print(
        f"probe ({time.monotonic() - started:.1f} s): "
        f"{'one request per option' if setup.one_prompt_per_request else 'all options in one'}"
        f", max_tokens {setup.max_tokens}"
    )
    wait_for_run(run, poll=0.2)
    run.refresh_from_db()
    contexts = [
        (choice_context([{"role": "user", "content": f"Q: {q}\nAnswer:"}]), options)
        for q, options in rows
    ]
    expected = reference(model, contexts)
    raw_ok = norm_ok = 0
    worst = 0.0
    for position, ((_, options), sums) in enumerate(zip(contexts, expected, strict=True)):
        response = Response.objects.get(run=run, item__position=position)
        got = [option["logprob"] for option in response.details["options"]]
        worst = max(worst, *(abs(a - b) for a, b in zip(got, sums, strict=True)))
        labels = [option["label"] for option in response.details["options"]]
        raw = labels[max(range(len(sums)), key=lambda i: (sums[i], -i))]
        per_char = [s / len(o) for s, o in zip(sums, options, strict=True)]
        norm = labels[max(range(len(sums)), key=lambda i: (per_char[i], -i))]
        raw_ok += response.details["pick"] == raw
        norm_ok += response.details["pick_norm"] == norm
    n = len(rows)
    naive = picks_with_offsets_as_sent(run, contexts)
    print(
        f"run #{run.pk} {run.status}: {run.done} done, {run.failed} failed of {n}, "
        f"{run.prompt_tokens} prompt + {run.completion_tokens} completion tokens"
    )
    print(f"picks as the tokens' log-probabilities imply: raw {raw_ok}/{n}, normalised "
          f"{norm_ok}/{n}; largest difference of an option's sum {worst:.2e} (limit "
          f"{TOLERANCE:g})")  # fmt: skip
    print(
        f"read with the offsets as the server sent them, the same picks: raw {naive[0]}/{n}, "
        f"normalised {naive[1]}/{n}"
    )
    return run.done == n and raw_ok == norm_ok == n and worst <= TOLERANCE


def picks_with_offsets_as_sent(run: Any, contexts: list[tuple[str, list[str]]]) -> tuple[int, int]:
    """How many (raw, normalised) picks stay the same when the offsets are read as they come
    (the tokens said to start at or after the context's length: for this server, the context's
    last token in, an option's last one-character token out), from the attempt log's replies."""
    from apps.runs.models import AttemptLog, Response

    same = [0, 0]
    for position, (context, options) in enumerate(contexts):
        replies = AttemptLog.objects.filter(run=run, item__position=position, ok=True)
        sums = []
        for log, option in zip(replies.order_by("pk"), options, strict=True):
            found = json.loads(log.raw_reply)["choices"][0]["logprobs"]
            end = len(context) + 1 + len(option)
            sums.append(sum(
                value or 0.0
                for value, offset in zip(found["token_logprobs"], found["text_offset"], strict=True)
                if len(context) <= offset < end
            ))  # fmt: skip
        per_char = [total / len(option) for total, option in zip(sums, options, strict=True)]
        response = Response.objects.get(run=run, item__position=position)
        labels = [option["label"] for option in response.details["options"]]
        for which, (values, key) in enumerate(((sums, "pick"), (per_char, "pick_norm"))):
            pick = max(range(len(values)), key=lambda i: (values[i], -i))
            same[which] += response.details[key] == labels[pick]
    return same[0], same[1]


# ---- 3. structured output -----------------------------------------------------------------------
def structured_output(base_url: str) -> bool:
    import asyncio

    from apps.runs.engine.llm import LLM, Attempt
    from apps.runs.models import Endpoint

    endpoint = Endpoint.objects.get(name="llama-cpp")
    schema = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}
    wanted = {"type": "json_schema", "json_schema": {"name": "s", "strict": True, "schema": schema}}

    async def ask() -> tuple[list[Attempt], list[str]]:
        llm = LLM(endpoint, slots=None, rate=None, stop=asyncio.Event(), connections=1)
        log: list[Attempt] = []
        texts = []
        try:
            for i in range(3):
                reply = await llm.chat(
                    [{"role": "user", "content": f"Score answer {i} as JSON."}],
                    log=log, item_id=i, response_format=wanted, max_tokens=40,
                )  # fmt: skip
                texts.append(reply.text)
        finally:
            await llm.close()
        return log, texts

    log, texts = asyncio.run(ask())
    parsed = []
    for text in texts:
        try:
            parsed.append(isinstance(json.loads(text).get("score"), int | float))
        except (ValueError, AttributeError):
            parsed.append(False)
    print(
        "structured output: "
        + ", ".join(f"{'ok' if a.ok else 'refused: ' + a.error[:60]}" for a in log)
        + f"; replies with a number: {sum(parsed)}/{len(texts)}"
    )
    return [a.ok for a in log] == [False, True, True, True] and all(parsed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", action="store_true", help="build .venv-llama if missing")
    parser.add_argument("--items", type=int, default=12)
    args = parser.parse_args()
    if not LLAMA_PYTHON.exists():
        if not args.build:
            print(f"no {LLAMA_VENV.name}: run with --build to build llama-cpp-python (minutes)")
            return
        print(f"built {LLAMA_VENV.name} in {build_venv():.0f} s")
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="evalsite-llama-"))
    server = None
    try:
        model = tmp / "tiny.gguf"
        subprocess.run(
            [str(LLAMA_PYTHON), str(ROOT / "bench" / "llama_cpp_model.py"), str(model)], check=True
        )
        port = free_port()
        server = start_server(model, port, tmp / "server.log")
        real_url = f"http://127.0.0.1:{port}/v1"
        with live_stack("llama", workers=1, llama_cpp=True) as loopback:
            ok = compare_quirks(real_url, loopback.base_url)
            ok = score_choices(real_url, model, args.items) and ok
            ok = structured_output(real_url) and ok
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    verdict = "all as expected" if ok else "MISMATCH (see above)"
    print(f"llama.cpp: {verdict} ({time.monotonic() - started:.0f} s)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
