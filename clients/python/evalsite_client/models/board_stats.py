from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="BoardStats")


@_attrs_define
class BoardStats:
    """
    Attributes:
        mean (float | None):
        ci_low (float | None):
        ci_high (float | None):
        ci_method (None | str):
        strict_mean (float | None):
        answered_mean (float | None):
        coverage (float | None):
        n (int):
        failed (int):
        missing (int):
    """

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    ci_method: None | str
    strict_mean: float | None
    answered_mean: float | None
    coverage: float | None
    n: int
    failed: int
    missing: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        mean: float | None
        mean = self.mean

        ci_low: float | None
        ci_low = self.ci_low

        ci_high: float | None
        ci_high = self.ci_high

        ci_method: None | str
        ci_method = self.ci_method

        strict_mean: float | None
        strict_mean = self.strict_mean

        answered_mean: float | None
        answered_mean = self.answered_mean

        coverage: float | None
        coverage = self.coverage

        n = self.n

        failed = self.failed

        missing = self.missing

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "mean": mean,
                "ci_low": ci_low,
                "ci_high": ci_high,
                "ci_method": ci_method,
                "strict_mean": strict_mean,
                "answered_mean": answered_mean,
                "coverage": coverage,
                "n": n,
                "failed": failed,
                "missing": missing,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_mean(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        mean = _parse_mean(d.pop("mean"))

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

        def _parse_ci_method(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        ci_method = _parse_ci_method(d.pop("ci_method"))

        def _parse_strict_mean(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        strict_mean = _parse_strict_mean(d.pop("strict_mean"))

        def _parse_answered_mean(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        answered_mean = _parse_answered_mean(d.pop("answered_mean"))

        def _parse_coverage(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        coverage = _parse_coverage(d.pop("coverage"))

        n = d.pop("n")

        failed = d.pop("failed")

        missing = d.pop("missing")

        board_stats = cls(
            mean=mean,
            ci_low=ci_low,
            ci_high=ci_high,
            ci_method=ci_method,
            strict_mean=strict_mean,
            answered_mean=answered_mean,
            coverage=coverage,
            n=n,
            failed=failed,
            missing=missing,
        )

        board_stats.additional_properties = d
        return board_stats

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
