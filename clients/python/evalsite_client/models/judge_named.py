from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="JudgeNamed")


@_attrs_define
class JudgeNamed:
    """
    Attributes:
        id (int):
        name (str):
        version (int):
        kind (str | Unset):  Default: ''.
        reply_format (str | Unset):  Default: ''.
        per_turn (bool | Unset):  Default: False.
    """

    id: int
    name: str
    version: int
    kind: str | Unset = ""
    reply_format: str | Unset = ""
    per_turn: bool | Unset = False
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        name = self.name

        version = self.version

        kind = self.kind

        reply_format = self.reply_format

        per_turn = self.per_turn

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "name": name,
                "version": version,
            }
        )
        if kind is not UNSET:
            field_dict["kind"] = kind
        if reply_format is not UNSET:
            field_dict["reply_format"] = reply_format
        if per_turn is not UNSET:
            field_dict["per_turn"] = per_turn

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id")

        name = d.pop("name")

        version = d.pop("version")

        kind = d.pop("kind", UNSET)

        reply_format = d.pop("reply_format", UNSET)

        per_turn = d.pop("per_turn", UNSET)

        judge_named = cls(
            id=id,
            name=name,
            version=version,
            kind=kind,
            reply_format=reply_format,
            per_turn=per_turn,
        )

        judge_named.additional_properties = d
        return judge_named

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
