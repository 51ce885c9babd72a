from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="RunOut")


@_attrs_define
class RunOut:
    """
    Attributes:
        id (int):
        kind (str):
        title (str):
        label (str):
        status (str):
        status_label (str):
        task (str):
        dataset (int):
        judge (int | None):
        source_run (int | None):
        source_column (str):
        epochs (int):
        multi_turn (bool):
        batch (bool):
        use_cache (bool):
        cached (int):
        sent (int):
        saved_cost (float):
        budget_usd (float | None):
        total (int):
        done (int):
        failed (int):
        not_run (int | None):
        percent (int):
        items_per_second (float | None):
        eta_seconds (float | None):
        prompt_tokens (int):
        completion_tokens (int):
        cost (float | None):
        failure_cause (str):
        created_at (datetime.datetime):
        started_at (datetime.datetime | None):
        finished_at (datetime.datetime | None):
        url (str):
    """

    id: int
    kind: str
    title: str
    label: str
    status: str
    status_label: str
    task: str
    dataset: int
    judge: int | None
    source_run: int | None
    source_column: str
    epochs: int
    multi_turn: bool
    batch: bool
    use_cache: bool
    cached: int
    sent: int
    saved_cost: float
    budget_usd: float | None
    total: int
    done: int
    failed: int
    not_run: int | None
    percent: int
    items_per_second: float | None
    eta_seconds: float | None
    prompt_tokens: int
    completion_tokens: int
    cost: float | None
    failure_cause: str
    created_at: datetime.datetime
    started_at: datetime.datetime | None
    finished_at: datetime.datetime | None
    url: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        kind = self.kind

        title = self.title

        label = self.label

        status = self.status

        status_label = self.status_label

        task = self.task

        dataset = self.dataset

        judge: int | None
        judge = self.judge

        source_run: int | None
        source_run = self.source_run

        source_column = self.source_column

        epochs = self.epochs

        multi_turn = self.multi_turn

        batch = self.batch

        use_cache = self.use_cache

        cached = self.cached

        sent = self.sent

        saved_cost = self.saved_cost

        budget_usd: float | None
        budget_usd = self.budget_usd

        total = self.total

        done = self.done

        failed = self.failed

        not_run: int | None
        not_run = self.not_run

        percent = self.percent

        items_per_second: float | None
        items_per_second = self.items_per_second

        eta_seconds: float | None
        eta_seconds = self.eta_seconds

        prompt_tokens = self.prompt_tokens

        completion_tokens = self.completion_tokens

        cost: float | None
        cost = self.cost

        failure_cause = self.failure_cause

        created_at = self.created_at.isoformat()

        started_at: None | str
        if isinstance(self.started_at, datetime.datetime):
            started_at = self.started_at.isoformat()
        else:
            started_at = self.started_at

        finished_at: None | str
        if isinstance(self.finished_at, datetime.datetime):
            finished_at = self.finished_at.isoformat()
        else:
            finished_at = self.finished_at

        url = self.url

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "kind": kind,
                "title": title,
                "label": label,
                "status": status,
                "status_label": status_label,
                "task": task,
                "dataset": dataset,
                "judge": judge,
                "source_run": source_run,
                "source_column": source_column,
                "epochs": epochs,
                "multi_turn": multi_turn,
                "batch": batch,
                "use_cache": use_cache,
                "cached": cached,
                "sent": sent,
                "saved_cost": saved_cost,
                "budget_usd": budget_usd,
                "total": total,
                "done": done,
                "failed": failed,
                "not_run": not_run,
                "percent": percent,
                "items_per_second": items_per_second,
                "eta_seconds": eta_seconds,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "cost": cost,
                "failure_cause": failure_cause,
                "created_at": created_at,
                "started_at": started_at,
                "finished_at": finished_at,
                "url": url,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id")

        kind = d.pop("kind")

        title = d.pop("title")

        label = d.pop("label")

        status = d.pop("status")

        status_label = d.pop("status_label")

        task = d.pop("task")

        dataset = d.pop("dataset")

        def _parse_judge(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        judge = _parse_judge(d.pop("judge"))

        def _parse_source_run(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        source_run = _parse_source_run(d.pop("source_run"))

        source_column = d.pop("source_column")

        epochs = d.pop("epochs")

        multi_turn = d.pop("multi_turn")

        batch = d.pop("batch")

        use_cache = d.pop("use_cache")

        cached = d.pop("cached")

        sent = d.pop("sent")

        saved_cost = d.pop("saved_cost")

        def _parse_budget_usd(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        budget_usd = _parse_budget_usd(d.pop("budget_usd"))

        total = d.pop("total")

        done = d.pop("done")

        failed = d.pop("failed")

        def _parse_not_run(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        not_run = _parse_not_run(d.pop("not_run"))

        percent = d.pop("percent")

        def _parse_items_per_second(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        items_per_second = _parse_items_per_second(d.pop("items_per_second"))

        def _parse_eta_seconds(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        eta_seconds = _parse_eta_seconds(d.pop("eta_seconds"))

        prompt_tokens = d.pop("prompt_tokens")

        completion_tokens = d.pop("completion_tokens")

        def _parse_cost(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        cost = _parse_cost(d.pop("cost"))

        failure_cause = d.pop("failure_cause")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        def _parse_started_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                started_at_type_0 = datetime.datetime.fromisoformat(data)

                return started_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        started_at = _parse_started_at(d.pop("started_at"))

        def _parse_finished_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                finished_at_type_0 = datetime.datetime.fromisoformat(data)

                return finished_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        finished_at = _parse_finished_at(d.pop("finished_at"))

        url = d.pop("url")

        run_out = cls(
            id=id,
            kind=kind,
            title=title,
            label=label,
            status=status,
            status_label=status_label,
            task=task,
            dataset=dataset,
            judge=judge,
            source_run=source_run,
            source_column=source_column,
            epochs=epochs,
            multi_turn=multi_turn,
            batch=batch,
            use_cache=use_cache,
            cached=cached,
            sent=sent,
            saved_cost=saved_cost,
            budget_usd=budget_usd,
            total=total,
            done=done,
            failed=failed,
            not_run=not_run,
            percent=percent,
            items_per_second=items_per_second,
            eta_seconds=eta_seconds,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost=cost,
            failure_cause=failure_cause,
            created_at=created_at,
            started_at=started_at,
            finished_at=finished_at,
            url=url,
        )

        run_out.additional_properties = d
        return run_out

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
