from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.upload_in_format import UploadInFormat
from ..types import UNSET, Unset

T = TypeVar("T", bound="UploadIn")


@_attrs_define
class UploadIn:
    """The upload page's two steps in one call: the file, then its column mapping. With no
    mapping field at all, the mapping the page would suggest is used (what each column name
    was in the task's earlier uploads, else a guess by its name).

        Attributes:
            name (str | Unset):  Default: ''.
            format_ (UploadInFormat | Unset):  Default: UploadInFormat.VALUE_0.
            sheet (str | Unset):  Default: ''.
            id_column (str | Unset):  Default: ''.
            input_columns (list[str] | Unset):
            reference_column (str | Unset):  Default: ''.
            tags_column (str | Unset):  Default: ''.
            response_columns (list[str] | Unset):
            conversation_column (str | Unset):  Default: ''.
    """

    name: str | Unset = ""
    format_: UploadInFormat | Unset = UploadInFormat.VALUE_0
    sheet: str | Unset = ""
    id_column: str | Unset = ""
    input_columns: list[str] | Unset = UNSET
    reference_column: str | Unset = ""
    tags_column: str | Unset = ""
    response_columns: list[str] | Unset = UNSET
    conversation_column: str | Unset = ""
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        format_: str | Unset = UNSET
        if not isinstance(self.format_, Unset):
            format_ = self.format_.value

        sheet = self.sheet

        id_column = self.id_column

        input_columns: list[str] | Unset = UNSET
        if not isinstance(self.input_columns, Unset):
            input_columns = self.input_columns

        reference_column = self.reference_column

        tags_column = self.tags_column

        response_columns: list[str] | Unset = UNSET
        if not isinstance(self.response_columns, Unset):
            response_columns = self.response_columns

        conversation_column = self.conversation_column

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if name is not UNSET:
            field_dict["name"] = name
        if format_ is not UNSET:
            field_dict["format"] = format_
        if sheet is not UNSET:
            field_dict["sheet"] = sheet
        if id_column is not UNSET:
            field_dict["id_column"] = id_column
        if input_columns is not UNSET:
            field_dict["input_columns"] = input_columns
        if reference_column is not UNSET:
            field_dict["reference_column"] = reference_column
        if tags_column is not UNSET:
            field_dict["tags_column"] = tags_column
        if response_columns is not UNSET:
            field_dict["response_columns"] = response_columns
        if conversation_column is not UNSET:
            field_dict["conversation_column"] = conversation_column

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        name = d.pop("name", UNSET)

        _format_ = d.pop("format", UNSET)
        format_: UploadInFormat | Unset
        if isinstance(_format_, Unset):
            format_ = UNSET
        else:
            format_ = UploadInFormat(_format_)

        sheet = d.pop("sheet", UNSET)

        id_column = d.pop("id_column", UNSET)

        input_columns = cast(list[str], d.pop("input_columns", UNSET))

        reference_column = d.pop("reference_column", UNSET)

        tags_column = d.pop("tags_column", UNSET)

        response_columns = cast(list[str], d.pop("response_columns", UNSET))

        conversation_column = d.pop("conversation_column", UNSET)

        upload_in = cls(
            name=name,
            format_=format_,
            sheet=sheet,
            id_column=id_column,
            input_columns=input_columns,
            reference_column=reference_column,
            tags_column=tags_column,
            response_columns=response_columns,
            conversation_column=conversation_column,
        )

        upload_in.additional_properties = d
        return upload_in

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
