"""Forms of the leaderboards app."""

from django import forms

from apps.leaderboards.models import BoardSettings


class ThresholdForm(forms.ModelForm):
    class Meta:
        model = BoardSettings
        fields = ["alignment_threshold"]
        labels = {"alignment_threshold": "Warn below this agreement (0–1, blank: never)"}
        widgets = {"alignment_threshold": forms.NumberInput(attrs={"step": "0.05"})}

    def clean_alignment_threshold(self) -> float | None:
        value = self.cleaned_data["alignment_threshold"]
        if value is not None and not 0 <= value <= 1:
            raise forms.ValidationError("Give a share between 0 and 1, e.g. 0.7.")
        return value
