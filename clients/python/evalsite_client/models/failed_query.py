from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.failed_query_kind import FailedQueryKind
from ..types import UNSET, Unset

T = TypeVar("T", bound="FailedQuery")


@_attrs_define
class FailedQuery:
    """
    Attributes:
        kind (FailedQueryKind | Unset):  Default: FailedQueryKind.VALUE_0.
        page (int | Unset):  Default: 1.
    """

    kind: FailedQueryKind | Unset = FailedQueryKind.VALUE_0
    page: int | Unset = 1
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        kind: str | Unset = UNSET
        if not isinstance(self.kind, Unset):
            kind = self.kind.value

        page = self.page

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if kind is not UNSET:
            field_dict["kind"] = kind
        if page is not UNSET:
            field_dict["page"] = page

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        _kind = d.pop("kind", UNSET)
        kind: FailedQueryKind | Unset
        if isinstance(_kind, Unset):
            kind = UNSET
        else:
            kind = FailedQueryKind(_kind)

        page = d.pop("page", UNSET)

        failed_query = cls(
            kind=kind,
            page=page,
        )

        failed_query.additional_properties = d
        return failed_query

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
