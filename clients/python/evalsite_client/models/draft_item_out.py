from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="DraftItemOut")


@_attrs_define
class DraftItemOut:
    """
    Attributes:
        id (int):
        key (str):
        content (str):
        question (str):
        reference (str):
        decision (str):
    """

    id: int
    key: str
    content: str
    question: str
    reference: str
    decision: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        key = self.key

        content = self.content

        question = self.question

        reference = self.reference

        decision = self.decision

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "key": key,
                "content": content,
                "question": question,
                "reference": reference,
                "decision": decision,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id")

        key = d.pop("key")

        content = d.pop("content")

        question = d.pop("question")

        reference = d.pop("reference")

        decision = d.pop("decision")

        draft_item_out = cls(
            id=id,
            key=key,
            content=content,
            question=question,
            reference=reference,
            decision=decision,
        )

        draft_item_out.additional_properties = d
        return draft_item_out

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
