from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="GateIn")


@_attrs_define
class GateIn:
    """
    Attributes:
        task (str):
        baseline (str):
        candidate (str):
        subject (None | str | Unset):
        margin (float | Unset):  Default: 0.0.
        alpha (float | Unset):  Default: 0.05.
        judge (None | str | Unset):
    """

    task: str
    baseline: str
    candidate: str
    subject: None | str | Unset = UNSET
    margin: float | Unset = 0.0
    alpha: float | Unset = 0.05
    judge: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        task = self.task

        baseline = self.baseline

        candidate = self.candidate

        subject: None | str | Unset
        if isinstance(self.subject, Unset):
            subject = UNSET
        else:
            subject = self.subject

        margin = self.margin

        alpha = self.alpha

        judge: None | str | Unset
        if isinstance(self.judge, Unset):
            judge = UNSET
        else:
            judge = self.judge

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "task": task,
                "baseline": baseline,
                "candidate": candidate,
            }
        )
        if subject is not UNSET:
            field_dict["subject"] = subject
        if margin is not UNSET:
            field_dict["margin"] = margin
        if alpha is not UNSET:
            field_dict["alpha"] = alpha
        if judge is not UNSET:
            field_dict["judge"] = judge

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        task = d.pop("task")

        baseline = d.pop("baseline")

        candidate = d.pop("candidate")

        def _parse_subject(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        subject = _parse_subject(d.pop("subject", UNSET))

        margin = d.pop("margin", UNSET)

        alpha = d.pop("alpha", UNSET)

        def _parse_judge(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        judge = _parse_judge(d.pop("judge", UNSET))

        gate_in = cls(
            task=task,
            baseline=baseline,
            candidate=candidate,
            subject=subject,
            margin=margin,
            alpha=alpha,
            judge=judge,
        )

        gate_in.additional_properties = d
        return gate_in

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
