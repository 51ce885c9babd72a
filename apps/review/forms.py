import math
from typing import cast
from urllib.parse import urlencode

from django import forms
from django.core.exceptions import ValidationError
from django.http import QueryDict

from apps.review.models import ReviewPolicy


class FiniteFloatField(forms.FloatField):
    def validate(self, value: float | None) -> None:
        super().validate(value)  # type: ignore[arg-type]
        if value is not None and not math.isfinite(value):
            raise ValidationError("Enter a number.", code="invalid")


class RevisionForm(forms.Form):
    """Every change says which revision of the score it was made on (the conflict rule)."""

    revision = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
    reason = forms.CharField(required=False, max_length=5000)


class OverrideForm(RevisionForm):
    value = FiniteFloatField(error_messages={"required": "Enter your value."})
    reason = forms.CharField(
        max_length=5000, error_messages={"required": "Say why you override the judge."}
    )


class BlindForm(forms.Form):
    value = FiniteFloatField(error_messages={"required": "Enter your value."})


class ReviewForm(forms.Form):
    """One reviewer's own value when several review each item (apps.review.models.Review)."""

    value = FiniteFloatField(error_messages={"required": "Enter your value."})
    reason = forms.CharField(required=False, max_length=5000)
    shown_at = FiniteFloatField(required=False, widget=forms.HiddenInput)


class AdjudicationForm(forms.Form):
    value = FiniteFloatField(error_messages={"required": "Enter the final value."})
    reason = forms.CharField(max_length=5000, error_messages={"required": "Say why this value."})


class PolicyForm(forms.Form):
    """A task's review policy, as admins set it."""

    reviews_per_item = forms.IntegerField(
        min_value=1,
        max_value=10,
        help_text="People who review each item on their own; 1: one reviewer's override or "
        "confirmation is the human value.",
    )
    adjudicator: forms.ModelChoiceField = forms.ModelChoiceField(
        queryset=None,
        required=False,
        empty_label="Admins only",
        help_text="Settles disagreements besides admins.",
    )
    thresholds = forms.CharField(
        required=False,
        max_length=2000,
        help_text="Per subject, the largest spread of the reviews' values still settled by "
        "their consensus, e.g. “accuracy=1, clarity=0”; a subject not named: 0 (any "
        "disagreement goes to adjudication).",
    )

    sample_percent = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=100,
        label="Review a random N % of items",
        help_text="Draws a random sample of each dataset's items, served by the queue order "
        "“The policy's random sample”. Only reviews on it correct the judge on the board "
        "(corrected scores); reviews of items chosen for being doubtful never do. Blank: no "
        "sample. Changing it or the seed draws another sample.",
    )
    sample_design = forms.ChoiceField(
        required=False,
        choices=ReviewPolicy.Design.choices,
        label="How the sample is drawn",
        help_text="Every item alike, or items the judges are least sure of (rounds that "
        "disagree, a value near the middle of the scale) likelier, each with a recorded "
        "probability the board weights its review by: the same width with fewer reviews.",
    )
    sample_seed = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=2**31 - 1,
        label="Seed of the random sample",
        help_text="Recorded with the sample; blank draws one at random.",
    )

    doubt_spread = forms.FloatField(
        required=False,
        min_value=0,
        label="Needs a person when rounds disagree by more than",
        help_text="Judged items whose rounds differ by more than this on a subject go first "
        "in the “needs a person” queue order; blank: never.",
    )
    doubt_repaired = forms.BooleanField(
        required=False,
        label="Needs a person when the judge's reply was read by tolerant parsing",
        help_text="Not one clean JSON object: prose, fences or a Python dict around the scores.",
    )

    doubt_confidence = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="Needs a person when the judge's stated confidence is below",
        help_text="For judges that are asked for their confidence (0–1); blank: never.",
    )

    def clean_thresholds(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for part in (self.cleaned_data.get("thresholds") or "").split(","):
            if not part.strip():
                continue
            name, sep, raw = part.partition("=")
            try:
                number = float(raw)
            except ValueError:
                number = math.nan
            if not sep or not name.strip() or not math.isfinite(number) or number < 0:
                raise ValidationError(
                    f"“{part.strip()}”: write subject=number, the number 0 or more."
                )
            out[name.strip()] = number
        return out


class ListFilterForm(forms.Form):
    STATUS = [("", "Any status"), ("failed", "Failed"), ("ok", "OK"), ("pending", "Not judged")]
    REVIEW = [
        ("", "Reviewed or not"),
        ("unreviewed", "Unreviewed"),
        ("reviewed", "Reviewed"),
        ("overridden", "Overridden"),
    ]
    ASSIGNED = [("", "Anyone's"), ("me", "Assigned to me"), ("none", "Unassigned")]
    PER_PAGE = [("50", "50"), ("100", "100"), ("200", "200"), ("500", "500"), ("25", "25")]

    q = forms.CharField(required=False, max_length=200, label="Search")
    status = forms.ChoiceField(choices=STATUS, required=False)
    review = forms.ChoiceField(choices=REVIEW, required=False)
    tag = forms.CharField(required=False, max_length=200)
    assigned = forms.ChoiceField(choices=ASSIGNED, required=False)
    per_page = forms.ChoiceField(choices=PER_PAGE, required=False, label="Per page")

    def values(self) -> dict[str, str]:
        """The valid filters, blank ones dropped (for links that keep them); an invalid one
        is ignored rather than throwing the others away."""
        self.is_valid()
        return {key: str(value) for key, value in self.cleaned_data.items() if value}

    def urlencoded(self) -> str:
        return urlencode(self.values())


class BulkForm(forms.Form):
    ACTIONS = [
        ("confirm", "Mark reviewed"),
        ("retry", "Retry failed"),
        ("retry_all", "Retry all failed"),
        ("assign", "Assign"),
        ("unassign", "Unassign"),
    ]
    action = forms.ChoiceField(choices=ACTIONS)
    assignee = forms.IntegerField(required=False)

    def item_ids(self) -> list[int]:
        """The ticked items; which of them belong to the run is the caller's filter."""
        return sorted(
            {int(raw) for raw in cast(QueryDict, self.data).getlist("item") if raw.isdigit()}
        )
