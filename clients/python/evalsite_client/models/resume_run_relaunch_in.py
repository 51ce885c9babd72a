from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.resume_run_relaunch_in_mode import ResumeRunRelaunchInMode
from ..types import UNSET, Unset

T = TypeVar("T", bound="ResumeRunRelaunchIn")


@_attrs_define
class ResumeRunRelaunchIn:
    """
    Attributes:
        mode (ResumeRunRelaunchInMode | Unset):  Default: ResumeRunRelaunchInMode.RESUME.
        budget_usd (float | None | Unset):
    """

    mode: ResumeRunRelaunchInMode | Unset = ResumeRunRelaunchInMode.RESUME
    budget_usd: float | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        mode: str | Unset = UNSET
        if not isinstance(self.mode, Unset):
            mode = self.mode.value

        budget_usd: float | None | Unset
        if isinstance(self.budget_usd, Unset):
            budget_usd = UNSET
        else:
            budget_usd = self.budget_usd

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if mode is not UNSET:
            field_dict["mode"] = mode
        if budget_usd is not UNSET:
            field_dict["budget_usd"] = budget_usd

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        _mode = d.pop("mode", UNSET)
        mode: ResumeRunRelaunchInMode | Unset
        if isinstance(_mode, Unset):
            mode = UNSET
        else:
            mode = ResumeRunRelaunchInMode(_mode)

        def _parse_budget_usd(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        budget_usd = _parse_budget_usd(d.pop("budget_usd", UNSET))

        resume_run_relaunch_in = cls(
            mode=mode,
            budget_usd=budget_usd,
        )

        return resume_run_relaunch_in
