from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error import Error
from ...models.run_export_format import RunExportFormat
from ...types import UNSET, Response, Unset


def _get_kwargs(
    pk: int,
    *,
    format_: RunExportFormat | Unset = RunExportFormat.CSV,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_format_: str | Unset = UNSET
    if not isinstance(format_, Unset):
        json_format_ = format_.value

    params["format"] = json_format_

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/runs/{pk}/export/".format(
            pk=quote(str(pk), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Error | str | None:
    if response.status_code == 200:
        response_200 = response.text
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
) -> Response[Error | str]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    pk: int,
    *,
    client: AuthenticatedClient,
    format_: RunExportFormat | Unset = RunExportFormat.CSV,
) -> Response[Error | str]:
    """Export a run's results

     Per item: a judge run's scores, or a generation run's responses; CSV (formula cells
    neutralised) or JSONL, streamed, as the run's export link gives it.

    Args:
        pk (int):
        format_ (RunExportFormat | Unset):  Default: RunExportFormat.CSV.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | str]
    """

    kwargs = _get_kwargs(
        pk=pk,
        format_=format_,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    pk: int,
    *,
    client: AuthenticatedClient,
    format_: RunExportFormat | Unset = RunExportFormat.CSV,
) -> Error | str | None:
    """Export a run's results

     Per item: a judge run's scores, or a generation run's responses; CSV (formula cells
    neutralised) or JSONL, streamed, as the run's export link gives it.

    Args:
        pk (int):
        format_ (RunExportFormat | Unset):  Default: RunExportFormat.CSV.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | str
    """

    return sync_detailed(
        pk=pk,
        client=client,
        format_=format_,
    ).parsed


async def asyncio_detailed(
    pk: int,
    *,
    client: AuthenticatedClient,
    format_: RunExportFormat | Unset = RunExportFormat.CSV,
) -> Response[Error | str]:
    """Export a run's results

     Per item: a judge run's scores, or a generation run's responses; CSV (formula cells
    neutralised) or JSONL, streamed, as the run's export link gives it.

    Args:
        pk (int):
        format_ (RunExportFormat | Unset):  Default: RunExportFormat.CSV.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | str]
    """

    kwargs = _get_kwargs(
        pk=pk,
        format_=format_,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    pk: int,
    *,
    client: AuthenticatedClient,
    format_: RunExportFormat | Unset = RunExportFormat.CSV,
) -> Error | str | None:
    """Export a run's results

     Per item: a judge run's scores, or a generation run's responses; CSV (formula cells
    neutralised) or JSONL, streamed, as the run's export link gives it.

    Args:
        pk (int):
        format_ (RunExportFormat | Unset):  Default: RunExportFormat.CSV.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | str
    """

    return (
        await asyncio_detailed(
            pk=pk,
            client=client,
            format_=format_,
        )
    ).parsed
