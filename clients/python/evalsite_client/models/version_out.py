from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.version_out_config import VersionOutConfig


T = TypeVar("T", bound="VersionOut")


@_attrs_define
class VersionOut:
    """
    Attributes:
        id (int):
        task (str):
        name (str):
        version (int):
        config (VersionOutConfig):
        created_at (str):
    """

    id: int
    task: str
    name: str
    version: int
    config: VersionOutConfig
    created_at: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        task = self.task

        name = self.name

        version = self.version

        config = self.config.to_dict()

        created_at = self.created_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "task": task,
                "name": name,
                "version": version,
                "config": config,
                "created_at": created_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.version_out_config import VersionOutConfig

        d = dict(src_dict)
        id = d.pop("id")

        task = d.pop("task")

        name = d.pop("name")

        version = d.pop("version")

        config = VersionOutConfig.from_dict(d.pop("config"))

        created_at = d.pop("created_at")

        version_out = cls(
            id=id,
            task=task,
            name=name,
            version=version,
            config=config,
            created_at=created_at,
        )

        version_out.additional_properties = d
        return version_out

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
