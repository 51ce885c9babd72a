from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.endpoint_out_config import EndpointOutConfig


T = TypeVar("T", bound="EndpointOut")


@_attrs_define
class EndpointOut:
    """
    Attributes:
        name (str):
        config (EndpointOutConfig):
        has_key (bool):
    """

    name: str
    config: EndpointOutConfig
    has_key: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        config = self.config.to_dict()

        has_key = self.has_key

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "name": name,
                "config": config,
                "has_key": has_key,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.endpoint_out_config import EndpointOutConfig

        d = dict(src_dict)
        name = d.pop("name")

        config = EndpointOutConfig.from_dict(d.pop("config"))

        has_key = d.pop("has_key")

        endpoint_out = cls(
            name=name,
            config=config,
            has_key=has_key,
        )

        endpoint_out.additional_properties = d
        return endpoint_out

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
