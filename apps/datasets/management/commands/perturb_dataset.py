"""Make a perturbed copy of a dataset (typos, casing, …), seeded, linked to its original."""

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from apps.datasets.models import Dataset
from apps.datasets.perturb import PERTURBATIONS, PerturbError, changed_count, perturb_dataset


class Command(BaseCommand):
    help = (
        "Copy a dataset with its inputs perturbed, item keys kept, as the dataset "
        '"<name> · <perturbation> (seed S)"; the same perturbation and seed again gives the '
        "copy already made."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("dataset_id", type=int)
        parser.add_argument(
            "--perturbation",
            required=True,
            help="; ".join(f"{p.name}: {p.description}" for p in PERTURBATIONS.values()),
        )
        parser.add_argument("--seed", type=int, default=0, help="default 0")

    def handle(self, *args: Any, **options: Any) -> None:
        original = Dataset.objects.select_related("task").filter(pk=options["dataset_id"]).first()
        if original is None:
            raise CommandError(f"No dataset with id {options['dataset_id']}.")
        before = set(original.perturbed_copies.values_list("pk", flat=True))
        try:
            copy = perturb_dataset(original, options["perturbation"], options["seed"])
        except PerturbError as exc:
            raise CommandError(str(exc)) from None
        made = "Already made" if copy.pk in before else "Made"
        self.stdout.write(
            self.style.SUCCESS(
                f"{made} {copy} (dataset #{copy.pk}) in {copy.task.slug} from {original} "
                f"(dataset #{original.pk}): {changed_count(copy)} of {copy.row_count} items "
                f"changed, tagged perturbed:{copy.perturbation}."
            )
        )
