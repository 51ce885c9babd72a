from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.failed_group import FailedGroup
    from ..models.failed_item import FailedItem


T = TypeVar("T", bound="FailedOut")


@_attrs_define
class FailedOut:
    """
    Attributes:
        run (int):
        kind (str):
        count (int):
        page (int):
        pages (int):
        groups (list[FailedGroup]):
        items (list[FailedItem]):
    """

    run: int
    kind: str
    count: int
    page: int
    pages: int
    groups: list[FailedGroup]
    items: list[FailedItem]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        run = self.run

        kind = self.kind

        count = self.count

        page = self.page

        pages = self.pages

        groups = []
        for groups_item_data in self.groups:
            groups_item = groups_item_data.to_dict()
            groups.append(groups_item)

        items = []
        for items_item_data in self.items:
            items_item = items_item_data.to_dict()
            items.append(items_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "run": run,
                "kind": kind,
                "count": count,
                "page": page,
                "pages": pages,
                "groups": groups,
                "items": items,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.failed_group import FailedGroup
        from ..models.failed_item import FailedItem

        d = dict(src_dict)
        run = d.pop("run")

        kind = d.pop("kind")

        count = d.pop("count")

        page = d.pop("page")

        pages = d.pop("pages")

        groups = []
        _groups = d.pop("groups")
        for groups_item_data in _groups:
            groups_item = FailedGroup.from_dict(groups_item_data)

            groups.append(groups_item)

        items = []
        _items = d.pop("items")
        for items_item_data in _items:
            items_item = FailedItem.from_dict(items_item_data)

            items.append(items_item)

        failed_out = cls(
            run=run,
            kind=kind,
            count=count,
            page=page,
            pages=pages,
            groups=groups,
            items=items,
        )

        failed_out.additional_properties = d
        return failed_out

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
