from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.pairwise_query_source import PairwiseQuerySource
from ..types import UNSET, Unset

T = TypeVar("T", bound="PairwiseQuery")


@_attrs_define
class PairwiseQuery:
    """The pairwise board page's query.

    Attributes:
        judge (int | None | str | Unset):
        source (PairwiseQuerySource | Unset):  Default: PairwiseQuerySource.JUDGE.
        baseline (int | None | Unset):
    """

    judge: int | None | str | Unset = UNSET
    source: PairwiseQuerySource | Unset = PairwiseQuerySource.JUDGE
    baseline: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        judge: int | None | str | Unset
        if isinstance(self.judge, Unset):
            judge = UNSET
        else:
            judge = self.judge

        source: str | Unset = UNSET
        if not isinstance(self.source, Unset):
            source = self.source.value

        baseline: int | None | Unset
        if isinstance(self.baseline, Unset):
            baseline = UNSET
        else:
            baseline = self.baseline

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if judge is not UNSET:
            field_dict["judge"] = judge
        if source is not UNSET:
            field_dict["source"] = source
        if baseline is not UNSET:
            field_dict["baseline"] = baseline

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_judge(data: object) -> int | None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | str | Unset, data)

        judge = _parse_judge(d.pop("judge", UNSET))

        _source = d.pop("source", UNSET)
        source: PairwiseQuerySource | Unset
        if isinstance(_source, Unset):
            source = UNSET
        else:
            source = PairwiseQuerySource(_source)

        def _parse_baseline(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        baseline = _parse_baseline(d.pop("baseline", UNSET))

        pairwise_query = cls(
            judge=judge,
            source=source,
            baseline=baseline,
        )

        pairwise_query.additional_properties = d
        return pairwise_query

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
