"""Files made by the real evaluation tools against the loopback LLM server, made once.

The tools live in venvs of their own (bin/_setup.sh: `setup_python interop` for Inspect AI,
`setup_python lmeval` for lm-evaluation-harness) or an npm tree of their own (`setup_node
promptfoo`), built here the first time a test needs them (bin/test builds them beside the other
tests), so a test run that never imports a tool's file never pays for it. Each file is made once per content of what makes it (the tool's pinned requirements, the
tool's task or config, the server's script) and kept under .local/interop-cache/: the SQLite
and PostgreSQL stages and every xdist worker share it, one of them making it under a lock.
"""

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.llm_server import LLMServer

ROOT = Path(__file__).resolve().parent.parent.parent
HERE = Path(__file__).resolve().parent
CACHE = ROOT / ".local" / "interop-cache"
# What each model of the server answers: model-a knows every capital, model-b one wrong.
SCRIPT = [
    {"match": "France", "reply": "Paris"},
    {"match": "Japan", "model": "model-a", "reply": "Tokyo"},
    {"match": "Japan", "reply": "Kyoto"},
    {"match": "Peru", "reply": "It is Lima."},
]
MODELS = ["model-a", "model-b"]


@contextmanager
def _locked(name: str) -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def tool_venv(kind: str) -> Path:
    """The venv of `kind` (bin/_setup.sh's use_venv), built or brought up to date first."""
    done = subprocess.run(
        ["bash", "-c", f'source bin/_setup.sh && setup_python {kind} && echo "$VENV"'],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if done.returncode != 0:
        raise RuntimeError(f"setup_python {kind} failed:\n{done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def tool_node(name: str) -> Path:
    """The npm tree of tests/interop/<name> (bin/_setup.sh's setup_node), installed first."""
    done = subprocess.run(
        ["bash", "-c", f'source bin/_setup.sh && setup_node {name} && echo "$NODE_DIR"'],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if done.returncode != 0:
        raise RuntimeError(f"setup_node {name} failed:\n{done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def made_once(name: str, inputs: list[Any], make: Callable[[Path], None]) -> Path:
    """The directory `make(directory)` filled for these `inputs` (files' contents are read),
    made by the first caller and reused by every later one."""
    digest = hashlib.sha256()
    for part in inputs:
        digest.update(part.read_bytes() if isinstance(part, Path) else json.dumps(part).encode())
    target = CACHE / f"{name}-{digest.hexdigest()[:16]}"
    with _locked(name):
        if not (target / ".done").exists():
            shutil.rmtree(target, ignore_errors=True)
            work = target.with_name(target.name + ".part")
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            make(work)
            (work / ".done").write_text("")
            work.rename(target)
    return target


@contextmanager
def loopback() -> Iterator[LLMServer]:
    with LLMServer.spawn() as server:
        server.configure(models=MODELS, script=SCRIPT)
        yield server


def run_tool(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float = 600,
    ok: tuple[int, ...] = (0,),
) -> str:
    """Run a tool with only PATH, HOME (the work directory) and `env`; its output."""
    done = subprocess.run(
        argv,
        cwd=cwd,
        env={"PATH": os.environ["PATH"], "HOME": str(cwd), **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode not in ok:
        raise RuntimeError(
            f"{argv[0]} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )
    return done.stdout


def inspect_logs() -> Path:
    """Inspect AI's logs of tests/interop/inspect_task.py, each model of the loopback server,
    in both formats: <dir>/eval/*.eval and <dir>/json/*.json."""
    requirements = HERE / "requirements-interop.txt"
    task = HERE / "inspect_task.py"

    def make(work: Path) -> None:
        venv = tool_venv("interop")
        shutil.copy(task, work / "inspect_task.py")
        with loopback() as server:
            for fmt in ("eval", "json"):
                run_tool(
                    [
                        str(venv / "bin" / "inspect"),
                        "eval",
                        "inspect_task.py",
                        "--model",
                        ",".join(f"openai-api/loopback/{m}" for m in MODELS),
                        "--log-format",
                        fmt,
                        "--log-dir",
                        str(work / fmt),
                        "--no-log-images",
                        "--display",
                        "plain",
                    ],
                    cwd=work,
                    env={
                        "LOOPBACK_API_KEY": "sk-loopback",
                        "LOOPBACK_BASE_URL": server.base_url,
                        "INSPECT_LOG_LEVEL": "warning",
                    },
                )

    return made_once("inspect", [requirements, task, SCRIPT], make)


def inspect_read(path: Path) -> dict[str, Any]:
    """What inspect_ai's own reader makes of a log: its scorers' results and each sample's
    scores, as JSON (read in the tool's venv, where inspect_ai is)."""
    venv = tool_venv("interop")
    code = (
        "import json, sys\n"
        "from inspect_ai.log import read_eval_log\n"
        "log = read_eval_log(sys.argv[1])\n"
        "print(json.dumps({\n"
        "  'status': log.status,\n"
        "  'results': [{'name': s.name, 'metrics': {k: m.value for k, m in s.metrics.items()}}\n"
        "              for s in log.results.scores],\n"
        "  'samples': [{'id': s.id, 'epoch': s.epoch,\n"
        "               'scores': {k: {'value': v.value, 'explanation': v.explanation}\n"
        "                          for k, v in s.scores.items()}} for s in log.samples],\n"
        "}))\n"
    )
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"inspect_ai could not read {path}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


LM_EVAL = HERE / "fixtures" / "lm_eval"


def lm_eval_outputs() -> Path:
    """lm-eval's --log_samples output of fixtures/lm_eval/capitals.yaml, each model of the
    loopback server through its OpenAI-compatible chat provider: <dir>/out/<model>/results_*.json
    and samples_capitals_*.jsonl, as lm_eval writes them."""
    requirements = HERE / "requirements-lm-eval.txt"
    config, data = LM_EVAL / "capitals.yaml", LM_EVAL / "capitals.jsonl"

    def make(work: Path) -> None:
        venv = tool_venv("lmeval")
        shutil.copy(data, work / "capitals.jsonl")
        # The task names its data file by absolute path (lm-eval's json loader needs one).
        text = config.read_text().replace(
            "/tmp/imp/lm/capitals.jsonl", str(work / "capitals.jsonl")
        )
        (work / "capitals.yaml").write_text(text)
        with loopback() as server:
            for model in MODELS:
                run_tool(
                    [
                        str(venv / "bin" / "lm_eval"),
                        "--model",
                        "local-chat-completions",
                        "--model_args",
                        f"model={model},base_url={server.base_url}/chat/completions,"
                        "tokenizer_backend=None",
                        "--tasks",
                        "capitals",
                        "--include_path",
                        ".",
                        "--apply_chat_template",
                        "--log_samples",
                        "--output_path",
                        "out",
                    ],
                    cwd=work,
                    env={
                        "OPENAI_API_KEY": "sk-loopback",
                        # Nothing from the Hugging Face hub: the task's data is the local file.
                        "HF_HUB_OFFLINE": "1",
                        "HF_DATASETS_OFFLINE": "1",
                        "HF_HOME": str(work / "hf"),
                    },
                )

    return made_once("lm-eval", [requirements, config, data, SCRIPT], make)


def lm_eval_read(directories: list[Path]) -> list[dict[str, Any]]:
    """What lm-eval's own code makes of output directories (each one model's results_*.json and
    samples_*.jsonl): the files lm_eval.utils picks as the latest, the table lm-eval prints of
    the results (lm_eval.utils.make_table), and the samples file as the `datasets` library loads
    it (as lm-eval's results are read on the Hugging Face hub), each sample's metrics. One
    process for all: importing lm_eval and datasets costs seconds."""
    venv = tool_venv("lmeval")
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "import datasets\n"
        "from lm_eval import utils\n"
        "found = []\n"
        "for directory in sys.argv[1:]:\n"
        "    names = [str(p) for p in Path(directory).iterdir()]\n"
        "    results = utils.get_latest_filename(utils.get_results_filenames(names))\n"
        "    samples = utils.get_latest_filename(utils.get_sample_results_filenames(names))\n"
        "    document = json.loads(Path(results).read_text())\n"
        "    rows = datasets.load_dataset('json', data_files=samples, split='train')\n"
        "    found.append({\n"
        "        'results': Path(results).name, 'samples': Path(samples).name,\n"
        "        'task': utils.get_file_task_name(Path(samples).name),\n"
        "        'table': utils.make_table(document),\n"
        "        'rows': [{k: row[k] for k in ('doc_id', 'exact_match', 'evalsite_review')\n"
        "                  if k in row} for row in rows],\n"
        "    })\n"
        "print(json.dumps(found))\n"
    )
    work = directories[0].parent
    out = run_tool(
        [str(venv / "bin" / "python"), "-c", code, *map(str, directories)],
        cwd=work,
        env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(work / "hf")},
        timeout=300,
    )
    return json.loads(out)


PROMPTFOO = HERE / "fixtures" / "promptfoo" / "promptfooconfig.yaml"
# promptfoo with nothing of this machine: its database, logs and cache in the work directory.
PROMPTFOO_ENV = {
    "PROMPTFOO_DISABLE_TELEMETRY": "1",
    "PROMPTFOO_DISABLE_UPDATE": "1",
    "PROMPTFOO_CACHE_ENABLED": "false",
    "OPENAI_API_KEY": "sk-loopback",
}


def promptfoo(
    work: Path, *args: str, env: dict[str, str] | None = None, ok: tuple[int, ...] = (0,)
) -> str:
    """Run promptfoo's command line in `work` (its database and logs in work/.promptfoo)."""
    node = tool_node("promptfoo")
    return run_tool(
        [str(node / "node_modules" / ".bin" / "promptfoo"), *args],
        cwd=work,
        env={**PROMPTFOO_ENV, "PROMPTFOO_CONFIG_DIR": str(work / ".promptfoo"), **(env or {})},
        ok=ok,
    )


def promptfoo_results() -> Path:
    """`promptfoo eval -c promptfooconfig.yaml -o results.json` (fixtures/promptfoo), both
    models of the loopback server through promptfoo's OpenAI provider: <dir>/results.json."""
    lock = HERE / "promptfoo" / "package-lock.json"

    def make(work: Path) -> None:
        shutil.copy(PROMPTFOO, work / "promptfooconfig.yaml")
        with loopback() as server:
            # Exit 100: some assertions failed, as they are meant to (model-b misses Tokyo).
            promptfoo(
                work,
                "eval", "-c", "promptfooconfig.yaml", "-o", "results.json",
                "--no-cache", "--no-progress-bar", "--no-table",
                env={"OPENAI_BASE_URL": server.base_url},
                ok=(0, 100),
            )  # fmt: skip

    return made_once("promptfoo", [lock, PROMPTFOO, SCRIPT], make)
