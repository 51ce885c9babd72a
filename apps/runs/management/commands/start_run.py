"""`manage.py start_run <kind> …`: start a run of any registered kind, optionally wait for it.

    start_run generation --dataset 3 --endpoint gpt4o --template qa [--wait]
    start_run resume RUN_ID [--budget USD] [--wait]    start_run retry-failed RUN_ID [--wait]
    start_run cancel RUN_ID [--wait]        (a batch-mode run's batch is cancelled at the provider)

Every kind takes --cache/--no-cache (reuse replies to identical requests; see
apps.runs.engine.cache) and --budget USD (stop before the run could spend more; apps.runs.engine.budget).

Each run kind in the registry (settings.RUN_KINDS) adds its own subcommand through its
plug-in's add_cli_arguments/create_from_cli (RunStarter), so `start_run judge …` comes
with the judge kind. With --wait the command
prints progress until the run ends and exits 0 only if every item was answered.
"""

import sys
import time
from argparse import ArgumentParser, BooleanOptionalAction
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from apps.runs.engine.budget import check_budget
from apps.runs.engine.contract import registered_kinds, starter_of
from apps.runs.engine.launch import LaunchError, launch
from apps.runs.engine.lifecycle import cancel
from apps.runs.models import Run, usd


class Command(BaseCommand):
    help = "Start a generation (or other registered kind of) run; --wait follows it to the end."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(
            dest="what", required=True, parser_class=_sub_parser_class(self)
        )
        for name in registered_kinds():
            plugin = starter_of(name)
            if not plugin.startable:
                continue
            kind_parser = sub.add_parser(name, help=f"start a {name} run")
            plugin.add_cli_arguments(kind_parser)
            kind_parser.add_argument(
                "--cache",
                action=BooleanOptionalAction,
                default=None,
                help="reuse replies to identical requests answered before (default: on for "
                "judges; for generation, off when the endpoint's temperature is above 0)",
            )
            _budget_argument(kind_parser)
            _wait_arguments(kind_parser)
        for name, text in (("resume", "items without a result"), ("retry-failed", "failed items")):
            again = sub.add_parser(name, help=f"launch an existing run again on its {text}")
            again.add_argument("run_id", type=int)
            _budget_argument(again, "a new budget for the run (to go on after it stopped at one)")
            _wait_arguments(again)
        stop = sub.add_parser("cancel", help="cancel a run that is going (resume finishes it)")
        stop.add_argument("run_id", type=int)
        _wait_arguments(stop)

    def handle(self, *args: Any, **options: Any) -> None:
        what = options["what"]
        if what == "cancel":
            run = Run.objects.filter(pk=options["run_id"]).first()
            if run is None:
                raise CommandError(f"No run with id {options['run_id']}.")
            if not run.is_active:
                raise CommandError(f"Run #{run.pk} is not going ({run.status_label.lower()}).")
            cancel(run)
            where = " (its batch is cancelled at the provider)" if run.batch else ""
            self.stdout.write(f"Run #{run.pk}: cancelling{where}.")
        elif what in ("resume", "retry-failed"):
            run = Run.objects.filter(pk=options["run_id"]).first()
            if run is None:
                raise CommandError(f"No run with id {options['run_id']}.")
            mode = Run.Mode.RESUME if what == "resume" else Run.Mode.RETRY_FAILED
            try:
                with transaction.atomic():
                    if options.get("budget") is not None:
                        run.set_budget(check_budget(options["budget"], run.endpoint))
                    count = launch(run, mode)
            except (LaunchError, ValueError) as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(f"Run #{run.pk}: {count} items to do.")
        else:
            run = starter_of(what).create_from_cli(options, user=None)
            # A judge run's title names its judge and what it judges (Run.title).
            size = f"{run.total} items"
            if run.kind == Run.Kind.GENERATION and run.epochs > 1:
                size = (
                    f"{run.total // run.epochs} items × {run.epochs} epochs = {run.total} responses"
                )
            batch_mode = " in batch mode" if run.batch else ""
            self.stdout.write(f"Started run #{run.pk} ({run.title}){batch_mode}: {size}.")
        if options["wait"]:
            sys.exit(self.wait(run, options["poll"]))

    def wait(self, run: Run, poll: float) -> int:
        last = None
        while True:
            run.refresh_from_db()
            line = (
                f"run #{run.pk} {'stalled' if run.is_stalled else run.status}: "
                f"{run.done} done, {run.failed} failed of {run.total}"
            )
            if run.not_run:
                line += f", {run.not_run} not run"
            if run.batch and run.is_active:
                settled, sent = run.batch_waiting
                if sent:
                    line += f" · batch: {settled} of {sent} requests answered at the provider"
            elif run.items_per_second:
                line += f" · {run.items_per_second:.1f} items/s"
            if run.is_terminal:
                # "$0" for a model without a price would read as free: say it is unknown.
                cost = usd(run.cost) if run.cost_known else f"unknown ({run.cost_hint})"
                line += f" · cost {cost}"
                if run.cache_text:
                    line += f" · {run.cache_text}"
                if run.stop_reason:
                    line += f" · stopped: {run.stop_reason}"
            if line != last:
                self.stdout.write(line)
                self.stdout.flush()
                last = line
            if run.is_terminal:
                break
            if run.is_stalled:
                self.stderr.write("No worker is working on this run any more: resume it.")
                return 3
            time.sleep(poll)
        if run.status == Run.Status.FAILED:
            # One line in plain words; the traceback stays on the run page, for admins.
            self.stderr.write(f"run #{run.pk} failed as a whole: {run.failure_cause}")
        if run.status == Run.Status.COMPLETED:
            return 0
        return 1 if run.status == Run.Status.COMPLETED_WITH_FAILURES else 2


def _budget_argument(parser: ArgumentParser, text: str = "") -> None:
    parser.add_argument(
        "--budget",
        metavar="USD",
        help=text or "stop cleanly before the run's cost could pass this many USD (resume goes on)",
    )


def _wait_arguments(parser: ArgumentParser) -> None:
    parser.add_argument(
        "--wait",
        action="store_true",
        help="follow progress; exit 0 when all items were answered, 1 if some failed, "
        "2 if the run failed or was cancelled, 3 if it stalled",
    )
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between progress lines")


def _sub_parser_class(command: BaseCommand) -> Any:
    """Subparsers that report errors like Django's CommandParser (CommandError, not exit 2)."""

    class SubParser(CommandParser):
        def __init__(self, **kwargs: Any) -> None:
            kwargs.setdefault(
                "called_from_command_line", getattr(command, "_called_from_command_line", None)
            )
            super().__init__(**kwargs)

    return SubParser
