from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.dataset_out import DatasetOut
    from ..models.judge_named import JudgeNamed
    from ..models.named import Named


T = TypeVar("T", bound="TaskDetailOut")


@_attrs_define
class TaskDetailOut:
    """
    Attributes:
        slug (str):
        name (str):
        description (str):
        datasets (int):
        runs (int):
        url (str):
        datasets_list (list[DatasetOut]):
        templates (list[Named]):
        judges (list[JudgeNamed]):
        default_judge (int | None):
    """

    slug: str
    name: str
    description: str
    datasets: int
    runs: int
    url: str
    datasets_list: list[DatasetOut]
    templates: list[Named]
    judges: list[JudgeNamed]
    default_judge: int | None
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        slug = self.slug

        name = self.name

        description = self.description

        datasets = self.datasets

        runs = self.runs

        url = self.url

        datasets_list = []
        for datasets_list_item_data in self.datasets_list:
            datasets_list_item = datasets_list_item_data.to_dict()
            datasets_list.append(datasets_list_item)

        templates = []
        for templates_item_data in self.templates:
            templates_item = templates_item_data.to_dict()
            templates.append(templates_item)

        judges = []
        for judges_item_data in self.judges:
            judges_item = judges_item_data.to_dict()
            judges.append(judges_item)

        default_judge: int | None
        default_judge = self.default_judge

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "slug": slug,
                "name": name,
                "description": description,
                "datasets": datasets,
                "runs": runs,
                "url": url,
                "datasets_list": datasets_list,
                "templates": templates,
                "judges": judges,
                "default_judge": default_judge,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.dataset_out import DatasetOut
        from ..models.judge_named import JudgeNamed
        from ..models.named import Named

        d = dict(src_dict)
        slug = d.pop("slug")

        name = d.pop("name")

        description = d.pop("description")

        datasets = d.pop("datasets")

        runs = d.pop("runs")

        url = d.pop("url")

        datasets_list = []
        _datasets_list = d.pop("datasets_list")
        for datasets_list_item_data in _datasets_list:
            datasets_list_item = DatasetOut.from_dict(datasets_list_item_data)

            datasets_list.append(datasets_list_item)

        templates = []
        _templates = d.pop("templates")
        for templates_item_data in _templates:
            templates_item = Named.from_dict(templates_item_data)

            templates.append(templates_item)

        judges = []
        _judges = d.pop("judges")
        for judges_item_data in _judges:
            judges_item = JudgeNamed.from_dict(judges_item_data)

            judges.append(judges_item)

        def _parse_default_judge(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        default_judge = _parse_default_judge(d.pop("default_judge"))

        task_detail_out = cls(
            slug=slug,
            name=name,
            description=description,
            datasets=datasets,
            runs=runs,
            url=url,
            datasets_list=datasets_list,
            templates=templates,
            judges=judges,
            default_judge=default_judge,
        )

        task_detail_out.additional_properties = d
        return task_detail_out

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
