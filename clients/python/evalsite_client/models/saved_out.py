from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.endpoint_out import EndpointOut
    from ..models.version_out import VersionOut


T = TypeVar("T", bound="SavedOut")


@_attrs_define
class SavedOut:
    """
    Attributes:
        action (str):
        changed (str):
        endpoint (EndpointOut | None | Unset):
        version (None | Unset | VersionOut):
    """

    action: str
    changed: str
    endpoint: EndpointOut | None | Unset = UNSET
    version: None | Unset | VersionOut = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.endpoint_out import EndpointOut
        from ..models.version_out import VersionOut

        action = self.action

        changed = self.changed

        endpoint: dict[str, Any] | None | Unset
        if isinstance(self.endpoint, Unset):
            endpoint = UNSET
        elif isinstance(self.endpoint, EndpointOut):
            endpoint = self.endpoint.to_dict()
        else:
            endpoint = self.endpoint

        version: dict[str, Any] | None | Unset
        if isinstance(self.version, Unset):
            version = UNSET
        elif isinstance(self.version, VersionOut):
            version = self.version.to_dict()
        else:
            version = self.version

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "action": action,
                "changed": changed,
            }
        )
        if endpoint is not UNSET:
            field_dict["endpoint"] = endpoint
        if version is not UNSET:
            field_dict["version"] = version

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.endpoint_out import EndpointOut
        from ..models.version_out import VersionOut

        d = dict(src_dict)
        action = d.pop("action")

        changed = d.pop("changed")

        def _parse_endpoint(data: object) -> EndpointOut | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                endpoint_type_0 = EndpointOut.from_dict(data)

                return endpoint_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(EndpointOut | None | Unset, data)

        endpoint = _parse_endpoint(d.pop("endpoint", UNSET))

        def _parse_version(data: object) -> None | Unset | VersionOut:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                version_type_0 = VersionOut.from_dict(data)

                return version_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | VersionOut, data)

        version = _parse_version(d.pop("version", UNSET))

        saved_out = cls(
            action=action,
            changed=changed,
            endpoint=endpoint,
            version=version,
        )

        saved_out.additional_properties = d
        return saved_out

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
