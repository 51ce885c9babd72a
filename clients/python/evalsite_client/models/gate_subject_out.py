from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="GateSubjectOut")


@_attrs_define
class GateSubjectOut:
    """
    Attributes:
        subject (str):
        n (int):
        mean_baseline (float | None):
        mean_candidate (float | None):
        mean_change (float | None):
        ci_low (float | None):
        ci_high (float | None):
        p_adjusted (float | None):
        test (None | str):
        items_needed (int | None):
        verdict (str):
        regressed_items (list[str]):
    """

    subject: str
    n: int
    mean_baseline: float | None
    mean_candidate: float | None
    mean_change: float | None
    ci_low: float | None
    ci_high: float | None
    p_adjusted: float | None
    test: None | str
    items_needed: int | None
    verdict: str
    regressed_items: list[str]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        subject = self.subject

        n = self.n

        mean_baseline: float | None
        mean_baseline = self.mean_baseline

        mean_candidate: float | None
        mean_candidate = self.mean_candidate

        mean_change: float | None
        mean_change = self.mean_change

        ci_low: float | None
        ci_low = self.ci_low

        ci_high: float | None
        ci_high = self.ci_high

        p_adjusted: float | None
        p_adjusted = self.p_adjusted

        test: None | str
        test = self.test

        items_needed: int | None
        items_needed = self.items_needed

        verdict = self.verdict

        regressed_items = self.regressed_items

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "subject": subject,
                "n": n,
                "mean_baseline": mean_baseline,
                "mean_candidate": mean_candidate,
                "mean_change": mean_change,
                "ci_low": ci_low,
                "ci_high": ci_high,
                "p_adjusted": p_adjusted,
                "test": test,
                "items_needed": items_needed,
                "verdict": verdict,
                "regressed_items": regressed_items,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        subject = d.pop("subject")

        n = d.pop("n")

        def _parse_mean_baseline(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        mean_baseline = _parse_mean_baseline(d.pop("mean_baseline"))

        def _parse_mean_candidate(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        mean_candidate = _parse_mean_candidate(d.pop("mean_candidate"))

        def _parse_mean_change(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        mean_change = _parse_mean_change(d.pop("mean_change"))

        def _parse_ci_low(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        ci_low = _parse_ci_low(d.pop("ci_low"))

        def _parse_ci_high(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        ci_high = _parse_ci_high(d.pop("ci_high"))

        def _parse_p_adjusted(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        p_adjusted = _parse_p_adjusted(d.pop("p_adjusted"))

        def _parse_test(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        test = _parse_test(d.pop("test"))

        def _parse_items_needed(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        items_needed = _parse_items_needed(d.pop("items_needed"))

        verdict = d.pop("verdict")

        regressed_items = cast(list[str], d.pop("regressed_items"))

        gate_subject_out = cls(
            subject=subject,
            n=n,
            mean_baseline=mean_baseline,
            mean_candidate=mean_candidate,
            mean_change=mean_change,
            ci_low=ci_low,
            ci_high=ci_high,
            p_adjusted=p_adjusted,
            test=test,
            items_needed=items_needed,
            verdict=verdict,
            regressed_items=regressed_items,
        )

        gate_subject_out.additional_properties = d
        return gate_subject_out

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
