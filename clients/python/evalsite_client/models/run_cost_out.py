from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="RunCostOut")


@_attrs_define
class RunCostOut:
    """
    Attributes:
        run_id (int):
        prompt_tokens (int):
        completion_tokens (int):
        usd (float | None):
        batch (bool):
        batch_saved_usd (float | None):
        cached (int):
        sent (int):
        cache_saved_usd (float | None):
    """

    run_id: int
    prompt_tokens: int
    completion_tokens: int
    usd: float | None
    batch: bool
    batch_saved_usd: float | None
    cached: int
    sent: int
    cache_saved_usd: float | None
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        run_id = self.run_id

        prompt_tokens = self.prompt_tokens

        completion_tokens = self.completion_tokens

        usd: float | None
        usd = self.usd

        batch = self.batch

        batch_saved_usd: float | None
        batch_saved_usd = self.batch_saved_usd

        cached = self.cached

        sent = self.sent

        cache_saved_usd: float | None
        cache_saved_usd = self.cache_saved_usd

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "run_id": run_id,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "usd": usd,
                "batch": batch,
                "batch_saved_usd": batch_saved_usd,
                "cached": cached,
                "sent": sent,
                "cache_saved_usd": cache_saved_usd,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        run_id = d.pop("run_id")

        prompt_tokens = d.pop("prompt_tokens")

        completion_tokens = d.pop("completion_tokens")

        def _parse_usd(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        usd = _parse_usd(d.pop("usd"))

        batch = d.pop("batch")

        def _parse_batch_saved_usd(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        batch_saved_usd = _parse_batch_saved_usd(d.pop("batch_saved_usd"))

        cached = d.pop("cached")

        sent = d.pop("sent")

        def _parse_cache_saved_usd(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        cache_saved_usd = _parse_cache_saved_usd(d.pop("cache_saved_usd"))

        run_cost_out = cls(
            run_id=run_id,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            usd=usd,
            batch=batch,
            batch_saved_usd=batch_saved_usd,
            cached=cached,
            sent=sent,
            cache_saved_usd=cache_saved_usd,
        )

        run_cost_out.additional_properties = d
        return run_cost_out

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
