"""A million-item run across a fleet (#33.3): PostgreSQL, a private Redis, the loopback LLM
server and 4 RQ worker processes started from two separate checkouts of HEAD (two "machines",
2 workers each), running a generation run of `--items` items and then its judge run.

    .venv-test/bin/python bench/bench_fleet.py [--items 1000000] [--latency 0.2] [--inflight 64]
                                               [--kill-at 0.4] [--no-judge]

Uses DATABASE_URL when it names PostgreSQL, else a throwaway cluster (bench_scale's
`postgres()`). Each "machine" is a `git clone --shared` of HEAD in a temporary directory (commit
first: the workers run what is committed), its workers run with that checkout as their working
directory and import path. The endpoint allows `--inflight` requests at once across the fleet;
the server answers each after `--latency` s, so the ceiling is in-flight ÷ latency requests/s.

It prints, per run: exactly one result per item (counted in SQL), the fleet's requests/s over
that ceiling (goal >= 0.9), the CPU seconds every process spent (workers with their work horses,
PostgreSQL, Redis, the LLM server) and so requests per CPU-second; over both runs, each worker's
RSS (its main process and its work horse, sampled every second: first quarter vs last quarter)
and Redis's used memory (INFO memory: before, peak, after). During the generation run, at
`--kill-at` of its items, one worker (process and work horse) is killed with SIGKILL, as if its
machine lost power; it prints what that cost: the requests sent again (the server's count minus
the items), of which the server saw how many cut mid-answer, against what the worker can have
had out (its share of the in-flight limit, plus answers waiting for their commit), and
starts a worker in its place, as a supervisor would. A 1M-item run is 2M requests: at the
defaults (320 requests/s) about two hours on a quiet machine; measure at `--items 50000` first.
"""

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_leaderboard import make_dataset  # noqa: E402
from bench_scale import postgres  # noqa: E402
from common import start_redis  # noqa: E402

from apps.runs.engine.tuning import FLUSH_AFTER  # noqa: E402

RATIO_GOAL = 0.9
WORKERS_PER_MACHINE = 2
SUBJECTS = ["accuracy", "clarity"]
REPLY = json.dumps({"reason": "Correct and clear.", "accuracy": 5, "clarity": 4})
TICK = os.sysconf("SC_CLK_TCK")


# ---- processes ---------------------------------------------------------------------------------
def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def process_tree() -> dict[int, list[int]]:
    """parent pid -> child pids, of every process now."""
    below: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            below.setdefault(int(stat[1]), []).append(int(entry))
    return below


def children(pid: int, below: dict[int, list[int]] | None = None) -> list[int]:
    """Every process below `pid` (RQ's work horse is a child of its worker)."""
    below = process_tree() if below is None else below
    found, todo = [], [pid]
    while todo:
        for child in below.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cpu_seconds(pid: int, below: dict[int, list[int]] | None = None) -> float:
    """CPU time of `pid` and everything below it, the children it has reaped included."""
    total = 0
    for each in [pid, *children(pid, below)]:
        if (stat := _stat(each)) is not None:
            total += sum(int(v) for v in stat[11:15])  # utime stime cutime cstime
    return total / TICK


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for row in handle:
                if row.startswith("VmRSS:"):
                    return int(row.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def postmaster(port: int) -> int | None:
    """The PostgreSQL server listening on `port` (its backends are its children)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"postgres") and str(port).encode() in argv:
            return int(entry)
    return None


@dataclass
class Worker:
    name: str
    checkout: Path
    proc: subprocess.Popen
    samples: list[tuple[float, float, float]] = field(default_factory=list)  # t, main, horse

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


class Fleet:
    """The worker processes of both machines, and a sampler of their memory and Redis's."""

    def __init__(self, workdir: Path, env: dict[str, str], queues: list[str]) -> None:
        self.workdir, self.env, self.queues = workdir, env, queues
        self.workers: list[Worker] = []
        self.dead: list[Worker] = []
        self.redis_used: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None

    def start(self, name: str, checkout: Path) -> Worker:
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "rqworker", *self.queues, "--name", name],
            cwd=checkout,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a SIGKILL takes the horse too
        )
        worker = Worker(name, checkout, proc)
        self.workers.append(worker)
        return worker

    def kill(self, worker: Worker) -> None:
        """SIGKILL the worker and its work horse at once: its machine lost power. (RQ puts
        the horse in a session of its own: killing the worker's group would miss it.)"""
        for pid in [worker.proc.pid, *children(worker.proc.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        worker.proc.wait(timeout=30)
        self.workers.remove(worker)
        self.dead.append(worker)

    def cpu(self, below: dict[int, list[int]]) -> float:
        return sum(cpu_seconds(w.proc.pid, below) for w in self.workers)

    def sample(self, redis_conn: Any, every: float = 1.0) -> None:
        def loop() -> None:
            while not self._stop.wait(every):
                now = time.monotonic()
                below = process_tree()
                for worker in list(self.workers):
                    horses = children(worker.proc.pid, below)
                    worker.samples.append(
                        (now, rss_mb(worker.proc.pid), sum(rss_mb(h) for h in horses))
                    )
                with contextlib.suppress(Exception):
                    used = redis_conn.info("memory")["used_memory"] / 1e6
                    self.redis_used.append((now, used))

        self._sampler = threading.Thread(target=loop, name="sampler", daemon=True)
        self._sampler.start()

    def stop(self) -> None:
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join(timeout=10)
        for worker in self.workers:
            worker.proc.terminate()  # RQ's warm shutdown: the horse finishes, then it exits
        for worker in self.workers:
            try:
                worker.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                for pid in [worker.proc.pid, *children(worker.proc.pid)]:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)


def checkout(workdir: Path, name: str) -> Path:
    """A separate checkout of HEAD, as on another machine."""
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    target = workdir / name
    subprocess.run(
        ["git", "clone", "-q", "--no-checkout", "--shared", str(ROOT), str(target)], check=True
    )
    subprocess.run(["git", "checkout", "-q", "--detach", head], cwd=target, check=True)
    return target


# ---- the runs ----------------------------------------------------------------------------------
@contextlib.contextmanager
def stack(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    workdir = Path(tempfile.mkdtemp(prefix="evalsite-bench-fleet-"))
    redis_proc, redis_url = start_redis(workdir)
    server = fleet = None
    try:
        with postgres() as url:
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
            env.update(
                DATABASE_URL=url,
                REDIS_URL=redis_url,
                EVALSITE_ENV_FILE="",
                EVALSITE_DATA_DIR=str(workdir / "data"),
                DJANGO_SETTINGS_MODULE="evalsite.settings",
                LOG_LEVEL="WARNING",
                DEBUG="0",
                PYTHONUNBUFFERED="1",
            )
            (workdir / "data").mkdir()
            os.environ.update(env)
            import django

            django.setup()
            from django.conf import settings
            from django.core.management import call_command

            from tests.llm_server import LLMServer

            call_command("migrate", verbosity=0, interactive=False)
            server = LLMServer.spawn()
            server.configure(latency=args.latency, default_reply=REPLY, log_size=10)
            machines = [checkout(workdir, f"machine-{m}") for m in "ab"]
            fleet = Fleet(workdir, env, list(settings.RQ_QUEUES))
            for machine in machines:
                for i in range(WORKERS_PER_MACHINE):
                    fleet.start(f"{machine.name}-w{i}", machine)
            import redis

            conn = redis.Redis.from_url(redis_url)
            deadline = time.monotonic() + 120
            while len(conn.smembers("rq:workers")) < len(fleet.workers):
                if time.monotonic() > deadline:
                    raise SystemExit(f"the workers did not start: see {workdir}/*.log")
                time.sleep(0.2)
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            yield {
                "server": server,
                "fleet": fleet,
                "redis": conn,
                "redis_pid": redis_proc.pid,
                "postgres_pid": postmaster(port),
                "machines": machines,
                "workdir": workdir,
            }
            from django.db import connection

            connection.close()
    finally:
        if fleet is not None:
            fleet.stop()
        if server is not None:
            server.stop()
        redis_proc.terminate()
        redis_proc.wait(timeout=10)
        if not args.keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)


class Cpu:
    """CPU seconds per part of the system between two points."""

    def __init__(self, ctx: dict[str, Any]) -> None:
        self.ctx = ctx
        self.start = self.read()

    def read(self) -> dict[str, float]:
        ctx, below = self.ctx, process_tree()
        return {
            "workers": ctx["fleet"].cpu(below),
            "postgres": cpu_seconds(ctx["postgres_pid"], below) if ctx["postgres_pid"] else 0.0,
            "redis": cpu_seconds(ctx["redis_pid"], below),
            "llm server": cpu_seconds(ctx["server"].pid, below),
            "bench (launch, sampling)": sum(os.times()[:2]),  # itself, not its servers
        }

    def spent(self, killed: float = 0.0) -> dict[str, float]:
        now = self.read()
        out = {k: now[k] - self.start[k] for k in now}
        out["workers"] += killed  # what the killed worker had spent, lost with its process
        return out


def wait_done(run: Any, until: float | None = None) -> None:
    from apps.runs.models import Run

    while True:
        row = Run.objects.filter(pk=run.pk).values("status", "done", "failed", "total").get()
        if until is not None and row["done"] + row["failed"] >= until * row["total"]:
            return
        if Run.objects.get(pk=run.pk).is_terminal:
            break
        time.sleep(0.5)
    run.refresh_from_db()
    if run.status != Run.Status.COMPLETED:
        raise SystemExit(f"run #{run.pk} ended {run.status}: {run.error[-2000:]}")


def drained(conn: Any, run: Any) -> str:
    """Wait until no job of `run` is queued; say how many chunk jobs it had and how long the
    queue took to empty after the run ended (jobs that find the list dry still cost a fork)."""
    import django_rq

    queue = django_rq.get_queue("runs")
    ended = time.monotonic()
    prefix = f"run-{run.pk}-"
    while any(name.startswith(prefix) for name in queue.get_job_ids()):
        time.sleep(0.2)
    seconds = time.monotonic() - ended
    jobs = [n for n in queue.finished_job_registry.get_job_ids() if n.startswith(prefix)]
    units: dict[str, int] = {}
    for job in queue.job_class.fetch_many(jobs, connection=queue.connection):
        said = str(job.return_value() if job is not None else "")
        if job is not None and said.split(" ")[0].isdigit():
            units[job.worker_name] = units.get(job.worker_name, 0) + int(said.split(" ")[0])
    spread = ", ".join(f"{name} {n:,}" for name, n in sorted(units.items()))
    return (
        f"{len(jobs)} chunk jobs; the queue held its jobs {seconds:.1f} s after it ended; "
        f"units per worker (finished chunks): {spread}"
    )


def once_per_item(table: str, run_id: int, items: int, per_item: int) -> str:
    """Counted in SQL: rows, distinct items, and items of the dataset with no row."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT count(*), count(DISTINCT item_id) FROM "{table}" WHERE run_id = %s',
            [run_id],
        )
        [[rows, distinct]] = cursor.fetchall()
    verdict = "ok" if rows == items * per_item and distinct == items else "WRONG"
    return f"{rows:,} rows for {distinct:,} distinct items of {items:,} ({per_item} per item): {verdict}"


def report_run(
    name: str,
    run: Any,
    args: argparse.Namespace,
    requests: int,
    cpu: dict[str, float],
    check: str,
) -> bool:
    seconds = (run.finished_at - run.started_at).total_seconds()
    rate = requests / seconds
    ceiling = args.inflight / args.latency
    engine_cpu = cpu["workers"] + cpu["postgres"] + cpu["redis"]
    total_cpu = engine_cpu + cpu["llm server"]
    print(f"\n{name} run #{run.pk}: {check}")
    print(
        f"  {requests:,} requests in {seconds:.0f} s = {rate:.0f}/s; ceiling {args.inflight} in "
        f"flight ÷ {args.latency * 1000:.0f} ms = {ceiling:.0f}/s → ratio {rate / ceiling:.2f} "
        f"(goal ≥ {RATIO_GOAL}) {'ok' if rate / ceiling >= RATIO_GOAL else 'MISSED'}"
    )
    print(
        "  CPU s: "
        + ", ".join(f"{k} {v:.0f}" for k, v in cpu.items())
        + f"\n  → {requests / max(engine_cpu, 1e-9):.0f} requests per CPU-second of workers + "
        f"PostgreSQL + Redis ({requests / max(total_cpu, 1e-9):.0f} with the LLM server)"
    )
    return rate / ceiling >= RATIO_GOAL


def quarters(values: list[tuple[float, float]]) -> tuple[float, float]:
    if len(values) < 4:
        return (values[0][1], values[-1][1]) if values else (0.0, 0.0)
    q = len(values) // 4
    first = [v for _, v in values[:q]]
    last = [v for _, v in values[-q:]]
    return sum(first) / len(first), sum(last) / len(last)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--chunk-size", type=int, default=200)
    parser.add_argument("--kill-at", type=float, default=0.4, help="0 kills no worker")
    parser.add_argument("--no-judge", action="store_true", help="the generation run only")
    parser.add_argument("--keep-logs", action="store_true", help="keep the workers' logs")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with stack(args) as ctx:
        ok = measure(args, ctx)
    sys.exit(0 if ok else 1)


def measure(args: argparse.Namespace, ctx: dict[str, Any]) -> bool:
    from django.db import connection, transaction

    from apps.datasets.models import Task
    from apps.judges.launching import create_judge_run
    from apps.judges.models import Judge, Score
    from apps.runs.kinds.generation import create_generation_run
    from apps.runs.models import Endpoint, PromptTemplate, Response

    server, fleet, conn = ctx["server"], ctx["fleet"], ctx["redis"]
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        [[version]] = cursor.fetchall()
    print(
        f"machine: {platform.node()}, {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f}; PostgreSQL {version}; {len(fleet.workers)} workers from "
        f"{len(ctx['machines'])} checkouts ({WORKERS_PER_MACHINE} each)"
    )
    print(
        f"volume: {args.items:,} items, a generation run and its judge run ({len(SUBJECTS)} "
        f"subjects); {args.inflight} in flight, {args.latency * 1000:.0f} ms latency, chunks of "
        f"{args.chunk_size}"
    )
    started = time.monotonic()
    task = Task.objects.create(slug="fleet", name="Fleet")
    dataset, _ = make_dataset(task, "fleet", args.items)
    dataset.mapping = {"input_columns": ["question"], "reference_column": "reference"}
    dataset.save(update_fields=["mapping"])
    print(f"dataset of {args.items:,} items built in {time.monotonic() - started:.0f} s")
    template = PromptTemplate.objects.create(
        task=task, name="qa", system_message="Answer briefly.", user_message="{{ question }}"
    )
    endpoint = Endpoint.objects.create(
        name="fleet",
        base_url=server.base_url,
        model="test-model",
        concurrency_limit=args.inflight,
        timeout_seconds=30,
        api_key_secret="sk-bench",
    )
    judge = Judge.objects.create(
        task=task,
        name="quality",
        kind=Judge.Kind.RUBRIC,
        subjects=[{"name": s, "min": 1, "max": 5} for s in SUBJECTS],
    )
    before_redis = conn.info("memory")["used_memory"] / 1e6
    fleet.sample(conn)
    ok = True

    # -- the generation run, with one worker killed mid-run
    server.reset(stats_only=True)
    cpu = Cpu(ctx)
    launched = time.perf_counter()
    with transaction.atomic():
        run = create_generation_run(
            dataset, endpoint, template, chunk_size=args.chunk_size, logging_mode="none"
        )
    print(
        f"\ngeneration run launched in {time.perf_counter() - launched:.1f} s "
        f"(pending keys listed, {conn.llen(f'evalsite:run:{run.pk}:l1:todo'):,} in Redis)"
    )
    killed_cpu = 0.0
    kill_line = ""
    if args.kill_at > 0:
        wait_done(run, until=args.kill_at)
        victim = fleet.workers[-1]
        cut_before = server.stats(log=False)["by_status"].get("closed", 0)
        killed_cpu = cpu_seconds(victim.proc.pid)
        at = time.monotonic()
        fleet.kill(victim)
        done_at_kill = Response.objects.filter(run=run).count()
        replacement = fleet.start(f"{victim.name}-again", victim.checkout)
        kill_line = f"{victim.name} killed at {done_at_kill:,} responses"
    wait_done(run)
    spent = cpu.spent(killed_cpu)
    stats = server.stats(log=False)
    requests = stats["requests"]
    check = once_per_item(Response._meta.db_table, run.pk, args.items, 1)
    check += "\n  " + drained(conn, run)
    ok &= report_run("generation", run, args, requests, spent, check)
    if args.kill_at > 0:
        cut = stats["by_status"].get("closed", 0) - cut_before
        again = requests - args.items
        share = math.ceil(args.inflight / (len(fleet.workers)))
        seconds = (run.finished_at - run.started_at).total_seconds()
        second = math.ceil(args.items / seconds / len(fleet.workers) * FLUSH_AFTER)
        print(
            f"  kill: {kill_line} (SIGKILL, worker and work horse; {replacement.name} started "
            f"in its place); run ended {time.monotonic() - at:.0f} s after the kill\n"
            f"  requests sent again: {again} = what it had sent and not committed: {cut} cut "
            f"mid-answer (the server saw the connection close), {again - cut} answered but "
            f"not yet committed;\n  bound: its share of the slots ({share}) + answers waiting "
            f"for the commit (≤ {FLUSH_AFTER:.0f} s of a worker's answers, {second}) = "
            f"{share + second} → {'ok' if again <= share + second else 'OVER'}"
            f"{'' if again <= share else f' (over its slots alone by {again - share})'}"
        )
        ok &= again <= share + second

    # -- its judge run
    if not args.no_judge:
        server.reset(stats_only=True)
        cpu = Cpu(ctx)
        with transaction.atomic():
            judge_run = create_judge_run(
                judge,
                endpoint=endpoint,
                source_run=run,
                chunk_size=args.chunk_size,
                logging_mode="none",
            )
        wait_done(judge_run)
        spent = cpu.spent()
        requests = server.stats(log=False)["requests"]
        check = once_per_item(Score._meta.db_table, judge_run.pk, args.items, len(SUBJECTS))
        check += "\n  " + drained(conn, judge_run)
        ok &= report_run("judge", judge_run, args, requests, spent, check)

    # -- memory over both runs
    fleet._stop.set()
    print("\nworker RSS, MB (main process + work horse; mean of the first vs the last quarter):")
    for worker in [*fleet.workers, *fleet.dead]:
        main = quarters([(t, m) for t, m, _ in worker.samples])
        horse = quarters([(t, h) for t, _, h in worker.samples])
        note = " (killed)" if worker in fleet.dead else ""
        print(
            f"  {worker.name}{note}: main {main[0]:.0f} → {main[1]:.0f}, horse {horse[0]:.0f} → "
            f"{horse[1]:.0f} ({len(worker.samples)} samples)"
        )
    used = [v for _, v in fleet.redis_used]
    after_redis = conn.info("memory")["used_memory"] / 1e6
    print(
        f"Redis used memory, MB: {before_redis:.1f} before, peak {max(used, default=0):.1f}, "
        f"{after_redis:.1f} after; keys now {conn.dbsize():,}"
    )
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return ok


if __name__ == "__main__":
    main()
