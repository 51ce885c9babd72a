from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.failed_round_messages_type_0_item import FailedRoundMessagesType0Item


T = TypeVar("T", bound="FailedRound")


@_attrs_define
class FailedRound:
    """A judge run's failed round, or one order of a pairwise comparison.

    Attributes:
        round_ (int):
        error_kind (str):
        error (str):
        raw_reply (str):
        messages (list[FailedRoundMessagesType0Item] | None | Unset):
        traceback (None | str | Unset):
    """

    round_: int
    error_kind: str
    error: str
    raw_reply: str
    messages: list[FailedRoundMessagesType0Item] | None | Unset = UNSET
    traceback: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        round_ = self.round_

        error_kind = self.error_kind

        error = self.error

        raw_reply = self.raw_reply

        messages: list[dict[str, Any]] | None | Unset
        if isinstance(self.messages, Unset):
            messages = UNSET
        elif isinstance(self.messages, list):
            messages = []
            for messages_type_0_item_data in self.messages:
                messages_type_0_item = messages_type_0_item_data.to_dict()
                messages.append(messages_type_0_item)

        else:
            messages = self.messages

        traceback: None | str | Unset
        if isinstance(self.traceback, Unset):
            traceback = UNSET
        else:
            traceback = self.traceback

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "round": round_,
                "error_kind": error_kind,
                "error": error,
                "raw_reply": raw_reply,
            }
        )
        if messages is not UNSET:
            field_dict["messages"] = messages
        if traceback is not UNSET:
            field_dict["traceback"] = traceback

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.failed_round_messages_type_0_item import (
            FailedRoundMessagesType0Item,
        )

        d = dict(src_dict)
        round_ = d.pop("round")

        error_kind = d.pop("error_kind")

        error = d.pop("error")

        raw_reply = d.pop("raw_reply")

        def _parse_messages(
            data: object,
        ) -> list[FailedRoundMessagesType0Item] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                messages_type_0 = []
                _messages_type_0 = data
                for messages_type_0_item_data in _messages_type_0:
                    messages_type_0_item = FailedRoundMessagesType0Item.from_dict(
                        messages_type_0_item_data
                    )

                    messages_type_0.append(messages_type_0_item)

                return messages_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[FailedRoundMessagesType0Item] | None | Unset, data)

        messages = _parse_messages(d.pop("messages", UNSET))

        def _parse_traceback(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        traceback = _parse_traceback(d.pop("traceback", UNSET))

        failed_round = cls(
            round_=round_,
            error_kind=error_kind,
            error=error,
            raw_reply=raw_reply,
            messages=messages,
            traceback=traceback,
        )

        failed_round.additional_properties = d
        return failed_round

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
