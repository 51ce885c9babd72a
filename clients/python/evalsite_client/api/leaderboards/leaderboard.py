from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.board_out import BoardOut
from ...models.error import Error
from ...models.leaderboard_common import LeaderboardCommon
from ...models.leaderboard_correction import LeaderboardCorrection
from ...models.leaderboard_dir_type_0 import LeaderboardDirType0
from ...models.leaderboard_pairs import LeaderboardPairs
from ...models.leaderboard_scoring import LeaderboardScoring
from ...models.leaderboard_values import LeaderboardValues
from ...types import UNSET, Response, Unset


def _get_kwargs(
    slug: str,
    *,
    judge: int | None | str | Unset = UNSET,
    judge_version: int | None | Unset = UNSET,
    dataset: int | None | Unset = UNSET,
    values: LeaderboardValues | Unset = LeaderboardValues.BOTH,
    scoring: LeaderboardScoring | Unset = LeaderboardScoring.STRICT,
    sort: str | Unset = "overall",
    dir_: LeaderboardDirType0 | None | Unset = UNSET,
    tag: None | str | Unset = UNSET,
    common: LeaderboardCommon | Unset = LeaderboardCommon.VALUE_0,
    cluster: None | str | Unset = UNSET,
    epochs: None | str | Unset = UNSET,
    correction: LeaderboardCorrection | Unset = LeaderboardCorrection.HOLM,
    pairs: LeaderboardPairs | Unset = LeaderboardPairs.VALUE_0,
    target: float | None | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_judge: int | None | str | Unset
    if isinstance(judge, Unset):
        json_judge = UNSET
    else:
        json_judge = judge
    params["judge"] = json_judge

    json_judge_version: int | None | Unset
    if isinstance(judge_version, Unset):
        json_judge_version = UNSET
    else:
        json_judge_version = judge_version
    params["judge_version"] = json_judge_version

    json_dataset: int | None | Unset
    if isinstance(dataset, Unset):
        json_dataset = UNSET
    else:
        json_dataset = dataset
    params["dataset"] = json_dataset

    json_values: str | Unset = UNSET
    if not isinstance(values, Unset):
        json_values = values.value

    params["values"] = json_values

    json_scoring: str | Unset = UNSET
    if not isinstance(scoring, Unset):
        json_scoring = scoring.value

    params["scoring"] = json_scoring

    params["sort"] = sort

    json_dir_: None | str | Unset
    if isinstance(dir_, Unset):
        json_dir_ = UNSET
    elif isinstance(dir_, LeaderboardDirType0):
        json_dir_ = dir_.value
    else:
        json_dir_ = dir_
    params["dir"] = json_dir_

    json_tag: None | str | Unset
    if isinstance(tag, Unset):
        json_tag = UNSET
    else:
        json_tag = tag
    params["tag"] = json_tag

    json_common: str | Unset = UNSET
    if not isinstance(common, Unset):
        json_common = common.value

    params["common"] = json_common

    json_cluster: None | str | Unset
    if isinstance(cluster, Unset):
        json_cluster = UNSET
    else:
        json_cluster = cluster
    params["cluster"] = json_cluster

    json_epochs: None | str | Unset
    if isinstance(epochs, Unset):
        json_epochs = UNSET
    else:
        json_epochs = epochs
    params["epochs"] = json_epochs

    json_correction: str | Unset = UNSET
    if not isinstance(correction, Unset):
        json_correction = correction.value

    params["correction"] = json_correction

    json_pairs: str | Unset = UNSET
    if not isinstance(pairs, Unset):
        json_pairs = pairs.value

    params["pairs"] = json_pairs

    json_target: float | None | Unset
    if isinstance(target, Unset):
        json_target = UNSET
    else:
        json_target = target
    params["target"] = json_target

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/leaderboards/{slug}/".format(
            slug=quote(str(slug), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> BoardOut | Error | None:
    if response.status_code == 200:
        response_200 = BoardOut.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = Error.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Error.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Error.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = Error.from_dict(response.json())

        return response_404

    if response.status_code == 422:
        response_422 = Error.from_dict(response.json())

        return response_422

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[BoardOut | Error]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    slug: str,
    *,
    client: AuthenticatedClient,
    judge: int | None | str | Unset = UNSET,
    judge_version: int | None | Unset = UNSET,
    dataset: int | None | Unset = UNSET,
    values: LeaderboardValues | Unset = LeaderboardValues.BOTH,
    scoring: LeaderboardScoring | Unset = LeaderboardScoring.STRICT,
    sort: str | Unset = "overall",
    dir_: LeaderboardDirType0 | None | Unset = UNSET,
    tag: None | str | Unset = UNSET,
    common: LeaderboardCommon | Unset = LeaderboardCommon.VALUE_0,
    cluster: None | str | Unset = UNSET,
    epochs: None | str | Unset = UNSET,
    correction: LeaderboardCorrection | Unset = LeaderboardCorrection.HOLM,
    pairs: LeaderboardPairs | Unset = LeaderboardPairs.VALUE_0,
    target: float | None | Unset = UNSET,
) -> Response[BoardOut | Error]:
    """A task's leaderboard

     The board the page shows, built from the same query: how it was built (judge,
    scoring, scales, the overall's formula), then one row per model, ranked, with each
    subject's mean, 95% CI, strict and answered-only means, coverage, n, failed and missing
    per view (judge-only and human-corrected), as in the JSONL export; where the review
    policy draws a random sample, `corrected` (PPI++ scores, pairs, the ranking note) too.

    Args:
        slug (str):
        judge (int | None | str | Unset):
        judge_version (int | None | Unset):
        dataset (int | None | Unset):
        values (LeaderboardValues | Unset):  Default: LeaderboardValues.BOTH.
        scoring (LeaderboardScoring | Unset):  Default: LeaderboardScoring.STRICT.
        sort (str | Unset):  Default: 'overall'.
        dir_ (LeaderboardDirType0 | None | Unset):
        tag (None | str | Unset):
        common (LeaderboardCommon | Unset):  Default: LeaderboardCommon.VALUE_0.
        cluster (None | str | Unset):
        epochs (None | str | Unset):
        correction (LeaderboardCorrection | Unset):  Default: LeaderboardCorrection.HOLM.
        pairs (LeaderboardPairs | Unset):  Default: LeaderboardPairs.VALUE_0.
        target (float | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BoardOut | Error]
    """

    kwargs = _get_kwargs(
        slug=slug,
        judge=judge,
        judge_version=judge_version,
        dataset=dataset,
        values=values,
        scoring=scoring,
        sort=sort,
        dir_=dir_,
        tag=tag,
        common=common,
        cluster=cluster,
        epochs=epochs,
        correction=correction,
        pairs=pairs,
        target=target,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    slug: str,
    *,
    client: AuthenticatedClient,
    judge: int | None | str | Unset = UNSET,
    judge_version: int | None | Unset = UNSET,
    dataset: int | None | Unset = UNSET,
    values: LeaderboardValues | Unset = LeaderboardValues.BOTH,
    scoring: LeaderboardScoring | Unset = LeaderboardScoring.STRICT,
    sort: str | Unset = "overall",
    dir_: LeaderboardDirType0 | None | Unset = UNSET,
    tag: None | str | Unset = UNSET,
    common: LeaderboardCommon | Unset = LeaderboardCommon.VALUE_0,
    cluster: None | str | Unset = UNSET,
    epochs: None | str | Unset = UNSET,
    correction: LeaderboardCorrection | Unset = LeaderboardCorrection.HOLM,
    pairs: LeaderboardPairs | Unset = LeaderboardPairs.VALUE_0,
    target: float | None | Unset = UNSET,
) -> BoardOut | Error | None:
    """A task's leaderboard

     The board the page shows, built from the same query: how it was built (judge,
    scoring, scales, the overall's formula), then one row per model, ranked, with each
    subject's mean, 95% CI, strict and answered-only means, coverage, n, failed and missing
    per view (judge-only and human-corrected), as in the JSONL export; where the review
    policy draws a random sample, `corrected` (PPI++ scores, pairs, the ranking note) too.

    Args:
        slug (str):
        judge (int | None | str | Unset):
        judge_version (int | None | Unset):
        dataset (int | None | Unset):
        values (LeaderboardValues | Unset):  Default: LeaderboardValues.BOTH.
        scoring (LeaderboardScoring | Unset):  Default: LeaderboardScoring.STRICT.
        sort (str | Unset):  Default: 'overall'.
        dir_ (LeaderboardDirType0 | None | Unset):
        tag (None | str | Unset):
        common (LeaderboardCommon | Unset):  Default: LeaderboardCommon.VALUE_0.
        cluster (None | str | Unset):
        epochs (None | str | Unset):
        correction (LeaderboardCorrection | Unset):  Default: LeaderboardCorrection.HOLM.
        pairs (LeaderboardPairs | Unset):  Default: LeaderboardPairs.VALUE_0.
        target (float | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BoardOut | Error
    """

    return sync_detailed(
        slug=slug,
        client=client,
        judge=judge,
        judge_version=judge_version,
        dataset=dataset,
        values=values,
        scoring=scoring,
        sort=sort,
        dir_=dir_,
        tag=tag,
        common=common,
        cluster=cluster,
        epochs=epochs,
        correction=correction,
        pairs=pairs,
        target=target,
    ).parsed


async def asyncio_detailed(
    slug: str,
    *,
    client: AuthenticatedClient,
    judge: int | None | str | Unset = UNSET,
    judge_version: int | None | Unset = UNSET,
    dataset: int | None | Unset = UNSET,
    values: LeaderboardValues | Unset = LeaderboardValues.BOTH,
    scoring: LeaderboardScoring | Unset = LeaderboardScoring.STRICT,
    sort: str | Unset = "overall",
    dir_: LeaderboardDirType0 | None | Unset = UNSET,
    tag: None | str | Unset = UNSET,
    common: LeaderboardCommon | Unset = LeaderboardCommon.VALUE_0,
    cluster: None | str | Unset = UNSET,
    epochs: None | str | Unset = UNSET,
    correction: LeaderboardCorrection | Unset = LeaderboardCorrection.HOLM,
    pairs: LeaderboardPairs | Unset = LeaderboardPairs.VALUE_0,
    target: float | None | Unset = UNSET,
) -> Response[BoardOut | Error]:
    """A task's leaderboard

     The board the page shows, built from the same query: how it was built (judge,
    scoring, scales, the overall's formula), then one row per model, ranked, with each
    subject's mean, 95% CI, strict and answered-only means, coverage, n, failed and missing
    per view (judge-only and human-corrected), as in the JSONL export; where the review
    policy draws a random sample, `corrected` (PPI++ scores, pairs, the ranking note) too.

    Args:
        slug (str):
        judge (int | None | str | Unset):
        judge_version (int | None | Unset):
        dataset (int | None | Unset):
        values (LeaderboardValues | Unset):  Default: LeaderboardValues.BOTH.
        scoring (LeaderboardScoring | Unset):  Default: LeaderboardScoring.STRICT.
        sort (str | Unset):  Default: 'overall'.
        dir_ (LeaderboardDirType0 | None | Unset):
        tag (None | str | Unset):
        common (LeaderboardCommon | Unset):  Default: LeaderboardCommon.VALUE_0.
        cluster (None | str | Unset):
        epochs (None | str | Unset):
        correction (LeaderboardCorrection | Unset):  Default: LeaderboardCorrection.HOLM.
        pairs (LeaderboardPairs | Unset):  Default: LeaderboardPairs.VALUE_0.
        target (float | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BoardOut | Error]
    """

    kwargs = _get_kwargs(
        slug=slug,
        judge=judge,
        judge_version=judge_version,
        dataset=dataset,
        values=values,
        scoring=scoring,
        sort=sort,
        dir_=dir_,
        tag=tag,
        common=common,
        cluster=cluster,
        epochs=epochs,
        correction=correction,
        pairs=pairs,
        target=target,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    slug: str,
    *,
    client: AuthenticatedClient,
    judge: int | None | str | Unset = UNSET,
    judge_version: int | None | Unset = UNSET,
    dataset: int | None | Unset = UNSET,
    values: LeaderboardValues | Unset = LeaderboardValues.BOTH,
    scoring: LeaderboardScoring | Unset = LeaderboardScoring.STRICT,
    sort: str | Unset = "overall",
    dir_: LeaderboardDirType0 | None | Unset = UNSET,
    tag: None | str | Unset = UNSET,
    common: LeaderboardCommon | Unset = LeaderboardCommon.VALUE_0,
    cluster: None | str | Unset = UNSET,
    epochs: None | str | Unset = UNSET,
    correction: LeaderboardCorrection | Unset = LeaderboardCorrection.HOLM,
    pairs: LeaderboardPairs | Unset = LeaderboardPairs.VALUE_0,
    target: float | None | Unset = UNSET,
) -> BoardOut | Error | None:
    """A task's leaderboard

     The board the page shows, built from the same query: how it was built (judge,
    scoring, scales, the overall's formula), then one row per model, ranked, with each
    subject's mean, 95% CI, strict and answered-only means, coverage, n, failed and missing
    per view (judge-only and human-corrected), as in the JSONL export; where the review
    policy draws a random sample, `corrected` (PPI++ scores, pairs, the ranking note) too.

    Args:
        slug (str):
        judge (int | None | str | Unset):
        judge_version (int | None | Unset):
        dataset (int | None | Unset):
        values (LeaderboardValues | Unset):  Default: LeaderboardValues.BOTH.
        scoring (LeaderboardScoring | Unset):  Default: LeaderboardScoring.STRICT.
        sort (str | Unset):  Default: 'overall'.
        dir_ (LeaderboardDirType0 | None | Unset):
        tag (None | str | Unset):
        common (LeaderboardCommon | Unset):  Default: LeaderboardCommon.VALUE_0.
        cluster (None | str | Unset):
        epochs (None | str | Unset):
        correction (LeaderboardCorrection | Unset):  Default: LeaderboardCorrection.HOLM.
        pairs (LeaderboardPairs | Unset):  Default: LeaderboardPairs.VALUE_0.
        target (float | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BoardOut | Error
    """

    return (
        await asyncio_detailed(
            slug=slug,
            client=client,
            judge=judge,
            judge_version=judge_version,
            dataset=dataset,
            values=values,
            scoring=scoring,
            sort=sort,
            dir_=dir_,
            tag=tag,
            common=common,
            cluster=cluster,
            epochs=epochs,
            correction=correction,
            pairs=pairs,
            target=target,
        )
    ).parsed
