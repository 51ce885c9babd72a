from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="CorpusOut")


@_attrs_define
class CorpusOut:
    """
    Attributes:
        metric (str):
        value (float | None):
        ci_low (float | None):
        ci_high (float | None):
        n (int):
    """

    metric: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        metric = self.metric

        value: float | None
        value = self.value

        ci_low: float | None
        ci_low = self.ci_low

        ci_high: float | None
        ci_high = self.ci_high

        n = self.n

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "metric": metric,
                "value": value,
                "ci_low": ci_low,
                "ci_high": ci_high,
                "n": n,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        metric = d.pop("metric")

        def _parse_value(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        value = _parse_value(d.pop("value"))

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

        n = d.pop("n")

        corpus_out = cls(
            metric=metric,
            value=value,
            ci_low=ci_low,
            ci_high=ci_high,
            n=n,
        )

        corpus_out.additional_properties = d
        return corpus_out

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
