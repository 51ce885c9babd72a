from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="PairwiseRow")


@_attrs_define
class PairwiseRow:
    """
    Attributes:
        rank (int):
        model (str):
        rating (float):
        ci_low (float):
        ci_high (float):
        battles (int):
        win_rate (float):
        prior_sd (float | None):
        mle_exists (bool | None):
        judge (str):
        source (str):
        position_consistency (float | None):
        first_position_share (float | None):
        baseline (None | str | Unset):
        win_rate_vs_baseline (float | None | Unset):
        lc_win_rate (float | None | Unset):
        length_difference (float | None | Unset):
    """

    rank: int
    model: str
    rating: float
    ci_low: float
    ci_high: float
    battles: int
    win_rate: float
    prior_sd: float | None
    mle_exists: bool | None
    judge: str
    source: str
    position_consistency: float | None
    first_position_share: float | None
    baseline: None | str | Unset = UNSET
    win_rate_vs_baseline: float | None | Unset = UNSET
    lc_win_rate: float | None | Unset = UNSET
    length_difference: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        rank = self.rank

        model = self.model

        rating = self.rating

        ci_low = self.ci_low

        ci_high = self.ci_high

        battles = self.battles

        win_rate = self.win_rate

        prior_sd: float | None
        prior_sd = self.prior_sd

        mle_exists: bool | None
        mle_exists = self.mle_exists

        judge = self.judge

        source = self.source

        position_consistency: float | None
        position_consistency = self.position_consistency

        first_position_share: float | None
        first_position_share = self.first_position_share

        baseline: None | str | Unset
        if isinstance(self.baseline, Unset):
            baseline = UNSET
        else:
            baseline = self.baseline

        win_rate_vs_baseline: float | None | Unset
        if isinstance(self.win_rate_vs_baseline, Unset):
            win_rate_vs_baseline = UNSET
        else:
            win_rate_vs_baseline = self.win_rate_vs_baseline

        lc_win_rate: float | None | Unset
        if isinstance(self.lc_win_rate, Unset):
            lc_win_rate = UNSET
        else:
            lc_win_rate = self.lc_win_rate

        length_difference: float | None | Unset
        if isinstance(self.length_difference, Unset):
            length_difference = UNSET
        else:
            length_difference = self.length_difference

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "rank": rank,
                "model": model,
                "rating": rating,
                "ci_low": ci_low,
                "ci_high": ci_high,
                "battles": battles,
                "win_rate": win_rate,
                "prior_sd": prior_sd,
                "mle_exists": mle_exists,
                "judge": judge,
                "source": source,
                "position_consistency": position_consistency,
                "first_position_share": first_position_share,
            }
        )
        if baseline is not UNSET:
            field_dict["baseline"] = baseline
        if win_rate_vs_baseline is not UNSET:
            field_dict["win_rate_vs_baseline"] = win_rate_vs_baseline
        if lc_win_rate is not UNSET:
            field_dict["lc_win_rate"] = lc_win_rate
        if length_difference is not UNSET:
            field_dict["length_difference"] = length_difference

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        rank = d.pop("rank")

        model = d.pop("model")

        rating = d.pop("rating")

        ci_low = d.pop("ci_low")

        ci_high = d.pop("ci_high")

        battles = d.pop("battles")

        win_rate = d.pop("win_rate")

        def _parse_prior_sd(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        prior_sd = _parse_prior_sd(d.pop("prior_sd"))

        def _parse_mle_exists(data: object) -> bool | None:
            if data is None:
                return data
            return cast(bool | None, data)

        mle_exists = _parse_mle_exists(d.pop("mle_exists"))

        judge = d.pop("judge")

        source = d.pop("source")

        def _parse_position_consistency(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        position_consistency = _parse_position_consistency(
            d.pop("position_consistency")
        )

        def _parse_first_position_share(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        first_position_share = _parse_first_position_share(
            d.pop("first_position_share")
        )

        def _parse_baseline(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        baseline = _parse_baseline(d.pop("baseline", UNSET))

        def _parse_win_rate_vs_baseline(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        win_rate_vs_baseline = _parse_win_rate_vs_baseline(
            d.pop("win_rate_vs_baseline", UNSET)
        )

        def _parse_lc_win_rate(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        lc_win_rate = _parse_lc_win_rate(d.pop("lc_win_rate", UNSET))

        def _parse_length_difference(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        length_difference = _parse_length_difference(d.pop("length_difference", UNSET))

        pairwise_row = cls(
            rank=rank,
            model=model,
            rating=rating,
            ci_low=ci_low,
            ci_high=ci_high,
            battles=battles,
            win_rate=win_rate,
            prior_sd=prior_sd,
            mle_exists=mle_exists,
            judge=judge,
            source=source,
            position_consistency=position_consistency,
            first_position_share=first_position_share,
            baseline=baseline,
            win_rate_vs_baseline=win_rate_vs_baseline,
            lc_win_rate=lc_win_rate,
            length_difference=length_difference,
        )

        pairwise_row.additional_properties = d
        return pairwise_row

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
