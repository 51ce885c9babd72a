from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.draft_item_out import DraftItemOut
    from ..models.draft_out_counts import DraftOutCounts


T = TypeVar("T", bound="DraftOut")


@_attrs_define
class DraftOut:
    """
    Attributes:
        dataset (int):
        name (str):
        status (str):
        counts (DraftOutCounts):
        items (list[DraftItemOut]):
    """

    dataset: int
    name: str
    status: str
    counts: DraftOutCounts
    items: list[DraftItemOut]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        dataset = self.dataset

        name = self.name

        status = self.status

        counts = self.counts.to_dict()

        items = []
        for items_item_data in self.items:
            items_item = items_item_data.to_dict()
            items.append(items_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "dataset": dataset,
                "name": name,
                "status": status,
                "counts": counts,
                "items": items,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.draft_item_out import DraftItemOut
        from ..models.draft_out_counts import DraftOutCounts

        d = dict(src_dict)
        dataset = d.pop("dataset")

        name = d.pop("name")

        status = d.pop("status")

        counts = DraftOutCounts.from_dict(d.pop("counts"))

        items = []
        _items = d.pop("items")
        for items_item_data in _items:
            items_item = DraftItemOut.from_dict(items_item_data)

            items.append(items_item)

        draft_out = cls(
            dataset=dataset,
            name=name,
            status=status,
            counts=counts,
            items=items,
        )

        draft_out.additional_properties = d
        return draft_out

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
