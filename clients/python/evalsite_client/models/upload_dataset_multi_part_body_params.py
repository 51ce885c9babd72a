from __future__ import annotations

from collections.abc import Mapping
from io import BytesIO
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from .. import types
from ..models.upload_dataset_multi_part_body_params_format import (
    UploadDatasetMultiPartBodyParamsFormat,
)
from ..types import UNSET, File, Unset

T = TypeVar("T", bound="UploadDatasetMultiPartBodyParams")


@_attrs_define
class UploadDatasetMultiPartBodyParams:
    """
    Attributes:
        file (File):
        name (str | Unset):  Default: ''.
        format_ (UploadDatasetMultiPartBodyParamsFormat | Unset):  Default:
            UploadDatasetMultiPartBodyParamsFormat.VALUE_0.
        sheet (str | Unset):  Default: ''.
        id_column (str | Unset):  Default: ''.
        input_columns (list[str] | Unset):
        reference_column (str | Unset):  Default: ''.
        tags_column (str | Unset):  Default: ''.
        response_columns (list[str] | Unset):
        conversation_column (str | Unset):  Default: ''.
    """

    file: File
    name: str | Unset = ""
    format_: UploadDatasetMultiPartBodyParamsFormat | Unset = (
        UploadDatasetMultiPartBodyParamsFormat.VALUE_0
    )
    sheet: str | Unset = ""
    id_column: str | Unset = ""
    input_columns: list[str] | Unset = UNSET
    reference_column: str | Unset = ""
    tags_column: str | Unset = ""
    response_columns: list[str] | Unset = UNSET
    conversation_column: str | Unset = ""
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        file = self.file.to_tuple()

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
        field_dict.update(
            {
                "file": file,
            }
        )
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

    def to_multipart(self) -> types.RequestFiles:
        files: types.RequestFiles = []

        files.append(("file", self.file.to_tuple()))

        if not isinstance(self.name, Unset):
            files.append(("name", (None, str(self.name).encode(), "text/plain")))

        if not isinstance(self.format_, Unset):
            files.append(
                ("format", (None, str(self.format_.value).encode(), "text/plain"))
            )

        if not isinstance(self.sheet, Unset):
            files.append(("sheet", (None, str(self.sheet).encode(), "text/plain")))

        if not isinstance(self.id_column, Unset):
            files.append(
                ("id_column", (None, str(self.id_column).encode(), "text/plain"))
            )

        if not isinstance(self.input_columns, Unset):
            for input_columns_item_element in self.input_columns:
                files.append(
                    (
                        "input_columns",
                        (None, str(input_columns_item_element).encode(), "text/plain"),
                    )
                )

        if not isinstance(self.reference_column, Unset):
            files.append(
                (
                    "reference_column",
                    (None, str(self.reference_column).encode(), "text/plain"),
                )
            )

        if not isinstance(self.tags_column, Unset):
            files.append(
                ("tags_column", (None, str(self.tags_column).encode(), "text/plain"))
            )

        if not isinstance(self.response_columns, Unset):
            for response_columns_item_element in self.response_columns:
                files.append(
                    (
                        "response_columns",
                        (
                            None,
                            str(response_columns_item_element).encode(),
                            "text/plain",
                        ),
                    )
                )

        if not isinstance(self.conversation_column, Unset):
            files.append(
                (
                    "conversation_column",
                    (None, str(self.conversation_column).encode(), "text/plain"),
                )
            )

        for prop_name, prop in self.additional_properties.items():
            files.append((prop_name, (None, str(prop).encode(), "text/plain")))

        return files

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        file = File(payload=BytesIO(d.pop("file")))

        name = d.pop("name", UNSET)

        _format_ = d.pop("format", UNSET)
        format_: UploadDatasetMultiPartBodyParamsFormat | Unset
        if isinstance(_format_, Unset):
            format_ = UNSET
        else:
            format_ = UploadDatasetMultiPartBodyParamsFormat(_format_)

        sheet = d.pop("sheet", UNSET)

        id_column = d.pop("id_column", UNSET)

        input_columns = cast(list[str], d.pop("input_columns", UNSET))

        reference_column = d.pop("reference_column", UNSET)

        tags_column = d.pop("tags_column", UNSET)

        response_columns = cast(list[str], d.pop("response_columns", UNSET))

        conversation_column = d.pop("conversation_column", UNSET)

        upload_dataset_multi_part_body_params = cls(
            file=file,
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

        upload_dataset_multi_part_body_params.additional_properties = d
        return upload_dataset_multi_part_body_params

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
