from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.gate_subject_out import GateSubjectOut


T = TypeVar("T", bound="GateOut")


@_attrs_define
class GateOut:
    """
    Attributes:
        status (str):
        exit_code (int | None | Unset):
        verdict (None | str | Unset):
        waiting_for (list[str] | Unset):
        baseline_run (int | None | Unset):
        candidate_run (int | None | Unset):
        subjects (list[GateSubjectOut] | Unset):
        markdown (str | Unset):  Default: ''.
        junit (str | Unset):  Default: ''.
    """

    status: str
    exit_code: int | None | Unset = UNSET
    verdict: None | str | Unset = UNSET
    waiting_for: list[str] | Unset = UNSET
    baseline_run: int | None | Unset = UNSET
    candidate_run: int | None | Unset = UNSET
    subjects: list[GateSubjectOut] | Unset = UNSET
    markdown: str | Unset = ""
    junit: str | Unset = ""
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        status = self.status

        exit_code: int | None | Unset
        if isinstance(self.exit_code, Unset):
            exit_code = UNSET
        else:
            exit_code = self.exit_code

        verdict: None | str | Unset
        if isinstance(self.verdict, Unset):
            verdict = UNSET
        else:
            verdict = self.verdict

        waiting_for: list[str] | Unset = UNSET
        if not isinstance(self.waiting_for, Unset):
            waiting_for = self.waiting_for

        baseline_run: int | None | Unset
        if isinstance(self.baseline_run, Unset):
            baseline_run = UNSET
        else:
            baseline_run = self.baseline_run

        candidate_run: int | None | Unset
        if isinstance(self.candidate_run, Unset):
            candidate_run = UNSET
        else:
            candidate_run = self.candidate_run

        subjects: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.subjects, Unset):
            subjects = []
            for subjects_item_data in self.subjects:
                subjects_item = subjects_item_data.to_dict()
                subjects.append(subjects_item)

        markdown = self.markdown

        junit = self.junit

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "status": status,
            }
        )
        if exit_code is not UNSET:
            field_dict["exit_code"] = exit_code
        if verdict is not UNSET:
            field_dict["verdict"] = verdict
        if waiting_for is not UNSET:
            field_dict["waiting_for"] = waiting_for
        if baseline_run is not UNSET:
            field_dict["baseline_run"] = baseline_run
        if candidate_run is not UNSET:
            field_dict["candidate_run"] = candidate_run
        if subjects is not UNSET:
            field_dict["subjects"] = subjects
        if markdown is not UNSET:
            field_dict["markdown"] = markdown
        if junit is not UNSET:
            field_dict["junit"] = junit

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.gate_subject_out import GateSubjectOut

        d = dict(src_dict)
        status = d.pop("status")

        def _parse_exit_code(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        exit_code = _parse_exit_code(d.pop("exit_code", UNSET))

        def _parse_verdict(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        verdict = _parse_verdict(d.pop("verdict", UNSET))

        waiting_for = cast(list[str], d.pop("waiting_for", UNSET))

        def _parse_baseline_run(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        baseline_run = _parse_baseline_run(d.pop("baseline_run", UNSET))

        def _parse_candidate_run(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        candidate_run = _parse_candidate_run(d.pop("candidate_run", UNSET))

        _subjects = d.pop("subjects", UNSET)
        subjects: list[GateSubjectOut] | Unset = UNSET
        if _subjects is not UNSET:
            subjects = []
            for subjects_item_data in _subjects:
                subjects_item = GateSubjectOut.from_dict(subjects_item_data)

                subjects.append(subjects_item)

        markdown = d.pop("markdown", UNSET)

        junit = d.pop("junit", UNSET)

        gate_out = cls(
            status=status,
            exit_code=exit_code,
            verdict=verdict,
            waiting_for=waiting_for,
            baseline_run=baseline_run,
            candidate_run=candidate_run,
            subjects=subjects,
            markdown=markdown,
            junit=junit,
        )

        gate_out.additional_properties = d
        return gate_out

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
