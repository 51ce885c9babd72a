"""Files made by the real evaluation tools against the loopback LLM server, made once.

The tools live in venvs of their own (bin/_setup.sh, `setup_python interop`), built here the
first time a test needs them, so a test run that never imports a tool's file never pays for
it. Each file is made once per content of what makes it (the tool's pinned requirements, the
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


def run_tool(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> None:
    done = subprocess.run(
        argv,
        cwd=cwd,
        env={"PATH": os.environ["PATH"], "HOME": str(cwd), **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{argv[0]} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )


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
