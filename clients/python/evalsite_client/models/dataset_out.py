from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.dataset_out_mapping import DatasetOutMapping


T = TypeVar("T", bound="DatasetOut")


@_attrs_define
class DatasetOut:
    """
    Attributes:
        id (int):
        task (str):
        name (str):
        version (int):
        status (str):
        error (str):
        format_ (str):
        file_name (str):
        row_count (int):
        columns (list[str]):
        mapping (DatasetOutMapping):
        url (str):
    """

    id: int
    task: str
    name: str
    version: int
    status: str
    error: str
    format_: str
    file_name: str
    row_count: int
    columns: list[str]
    mapping: DatasetOutMapping
    url: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        task = self.task

        name = self.name

        version = self.version

        status = self.status

        error = self.error

        format_ = self.format_

        file_name = self.file_name

        row_count = self.row_count

        columns = self.columns

        mapping = self.mapping.to_dict()

        url = self.url

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "task": task,
                "name": name,
                "version": version,
                "status": status,
                "error": error,
                "format": format_,
                "file_name": file_name,
                "row_count": row_count,
                "columns": columns,
                "mapping": mapping,
                "url": url,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.dataset_out_mapping import DatasetOutMapping

        d = dict(src_dict)
        id = d.pop("id")

        task = d.pop("task")

        name = d.pop("name")

        version = d.pop("version")

        status = d.pop("status")

        error = d.pop("error")

        format_ = d.pop("format")

        file_name = d.pop("file_name")

        row_count = d.pop("row_count")

        columns = cast(list[str], d.pop("columns"))

        mapping = DatasetOutMapping.from_dict(d.pop("mapping"))

        url = d.pop("url")

        dataset_out = cls(
            id=id,
            task=task,
            name=name,
            version=version,
            status=status,
            error=error,
            format_=format_,
            file_name=file_name,
            row_count=row_count,
            columns=columns,
            mapping=mapping,
            url=url,
        )

        dataset_out.additional_properties = d
        return dataset_out

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
