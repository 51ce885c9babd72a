"""`manage.py gate`: a release gate on the board's paired test (apps/leaderboards/gate.py).

    gate --task T --baseline RUN|LABEL --candidate RUN|LABEL [--subject S] [--margin M]
         [--alpha A] [--judge NAME] [--junit FILE] [--markdown FILE] [--timeout SECONDS]

RUN is a run id (a judge run, or a run of answers: its judge run is waited for, or started on
the task's default judge when it has none); LABEL is the model's name on the board. Waits until
both judge runs have finished, prints the Markdown summary and writes the JUnit XML. Exit 0: no
significant regression beyond the margin; 1: a significant regression (the subjects and items
listed); 2: not enough items to tell (the items needed at 80 % power said); 3: the gate could
not run (no such task, run or label; a run that failed; waited longer than --timeout).
"""

import sys
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.datasets.models import Task
from apps.leaderboards.gate import GateError, compare, gate_judge, junit, markdown, side

CANNOT_RUN = 3
POLL_SECONDS = 2.0


class Command(BaseCommand):
    help = "Compare a candidate with a baseline on the same items; exit 0, 1 (regression) or 2."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--task", required=True, help="task slug")
        parser.add_argument("--baseline", required=True, help="run id or model label")
        parser.add_argument("--candidate", required=True, help="run id or model label")
        parser.add_argument("--subject", help="one subject (or overall); default: every subject")
        parser.add_argument(
            "--margin", type=float, default=0.0, help="a drop this size is no regression"
        )
        parser.add_argument("--alpha", type=float, default=0.05, help="significance level")
        parser.add_argument("--judge", help="judge name (default: the task's default judge)")
        parser.add_argument("--junit", help="write JUnit XML to this file")
        parser.add_argument("--markdown", help="write the Markdown summary to this file too")
        parser.add_argument(
            "--timeout", type=float, default=3600.0, help="seconds to wait for the judge runs"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not 0 < options["alpha"] < 1 or options["margin"] < 0:
            raise CommandError(
                "--alpha is between 0 and 1, --margin 0 or more.", returncode=CANNOT_RUN
            )
        task = Task.objects.filter(slug=options["task"]).first()
        if task is None:
            raise CommandError(f"There is no task {options['task']!r}.", returncode=CANNOT_RUN)
        try:
            judge = gate_judge(task, options["judge"])
            baseline, candidate = self._wait(task, judge, options)
            gate = compare(
                baseline, candidate, options["subject"], options["margin"], options["alpha"]
            )
        except (GateError, ValueError) as exc:
            raise CommandError(str(exc), returncode=CANNOT_RUN) from None
        summary = markdown(gate)
        self.stdout.write(summary, ending="")
        if options["markdown"]:
            Path(options["markdown"]).write_text(summary, encoding="utf-8")
        if options["junit"]:
            Path(options["junit"]).write_text(junit(gate), encoding="utf-8")
        sys.exit(gate.exit_code)

    def _wait(self, task: Task, judge: Any, options: dict[str, Any]) -> tuple[Any, Any]:
        deadline = time.monotonic() + options["timeout"]
        said = ""
        while True:
            sides = [side(task, options[name], judge) for name in ("baseline", "candidate")]
            waiting = "; ".join(s.waiting_for for s in sides if not s.ready)
            if not waiting:
                return sides[0].judged, sides[1].judged
            if time.monotonic() > deadline:
                raise GateError(f"Waited {options['timeout']:g} s, still waiting for {waiting}.")
            if waiting != said:
                self.stderr.write(f"Waiting for {waiting}…")
                said = waiting
            time.sleep(POLL_SECONDS)
