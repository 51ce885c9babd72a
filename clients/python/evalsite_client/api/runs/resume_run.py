from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error import Error
from ...models.resume_run_relaunch_in import ResumeRunRelaunchIn
from ...models.run_out import RunOut
from ...types import UNSET, Response, Unset


def _get_kwargs(
    pk: int,
    *,
    body: ResumeRunRelaunchIn | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/runs/{pk}/resume/".format(
            pk=quote(str(pk), safe=""),
        ),
    }

    if not isinstance(body, Unset):
        _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Error | RunOut | None:
    if response.status_code == 200:
        response_200 = RunOut.from_dict(response.json())

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

    if response.status_code == 409:
        response_409 = Error.from_dict(response.json())

        return response_409

    if response.status_code == 422:
        response_422 = Error.from_dict(response.json())

        return response_422

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Error | RunOut]:
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
    body: ResumeRunRelaunchIn | Unset = UNSET,
) -> Response[Error | RunOut]:
    """Resume a run, retry its failed items or run it again

     As the run page's buttons, with the same refusals (409 for a complete run's resume, or
    retrying a run with nothing failed); a `budget_usd` replaces the budget first (a run
    stopped by its budget goes on once it is raised). The body may be left out.

    Args:
        pk (int):
        body (ResumeRunRelaunchIn | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | RunOut]
    """

    kwargs = _get_kwargs(
        pk=pk,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    pk: int,
    *,
    client: AuthenticatedClient,
    body: ResumeRunRelaunchIn | Unset = UNSET,
) -> Error | RunOut | None:
    """Resume a run, retry its failed items or run it again

     As the run page's buttons, with the same refusals (409 for a complete run's resume, or
    retrying a run with nothing failed); a `budget_usd` replaces the budget first (a run
    stopped by its budget goes on once it is raised). The body may be left out.

    Args:
        pk (int):
        body (ResumeRunRelaunchIn | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | RunOut
    """

    return sync_detailed(
        pk=pk,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    pk: int,
    *,
    client: AuthenticatedClient,
    body: ResumeRunRelaunchIn | Unset = UNSET,
) -> Response[Error | RunOut]:
    """Resume a run, retry its failed items or run it again

     As the run page's buttons, with the same refusals (409 for a complete run's resume, or
    retrying a run with nothing failed); a `budget_usd` replaces the budget first (a run
    stopped by its budget goes on once it is raised). The body may be left out.

    Args:
        pk (int):
        body (ResumeRunRelaunchIn | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Error | RunOut]
    """

    kwargs = _get_kwargs(
        pk=pk,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    pk: int,
    *,
    client: AuthenticatedClient,
    body: ResumeRunRelaunchIn | Unset = UNSET,
) -> Error | RunOut | None:
    """Resume a run, retry its failed items or run it again

     As the run page's buttons, with the same refusals (409 for a complete run's resume, or
    retrying a run with nothing failed); a `budget_usd` replaces the budget first (a run
    stopped by its budget goes on once it is raised). The body may be left out.

    Args:
        pk (int):
        body (ResumeRunRelaunchIn | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Error | RunOut
    """

    return (
        await asyncio_detailed(
            pk=pk,
            client=client,
            body=body,
        )
    ).parsed
