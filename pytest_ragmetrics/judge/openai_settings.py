"""What the judge's ``openai`` client is built from, checked before it is: an API key (or what to
do without one), a base URL that says http:// or https://, Azure OpenAI's endpoint and API version,
and the HTTP client an older SDK needs. The plugin calls the checks at startup, so a setting that
could not work is one usage error naming it, not a failure in every test.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import ConfigError
from ..redact import add_url, redact
from .base import HowToSet, by_environment


def no_key_message(azure: bool = False, how_to_set: HowToSet = by_environment) -> str:
    """What to do without an API key, in the wording ``how_to_set`` gives the settings."""
    replay = (
        f"or, to use recorded judgments without calling the judge, set {how_to_set('cache', 'replay')}; "
        "replay needs the judgments recorded in the judgment store directory "
        f"({how_to_set('store_dir', 'PATH')}), committed by a run that had a key"
    )
    if azure:
        return (
            "no API key for the Azure OpenAI judge: set AZURE_OPENAI_API_KEY (or AZURE_OPENAI_AD_TOKEN), "
            + replay
        )
    return (
        "no API key for the LLM judge: set OPENAI_API_KEY (and OPENAI_BASE_URL or "
        f"{how_to_set('judge_base_url', 'URL')} to use another OpenAI-compatible server), {replay}"
    )


#: How a missing API key is said after the first time.
NO_KEY_AGAIN = "no API key for the LLM judge"


def check_base_url(base_url: str | None = None, how_to_set: HowToSet = by_environment) -> None:
    """Raise :class:`ConfigError` when the judge's base URL (``base_url``, else ``OPENAI_BASE_URL``)
    has no ``http://`` or ``https://``: ``localhost:11434/v1`` would fail every judgment after its
    retries, as a connection error. The plugin calls it at startup."""
    url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    if url is None or re.match(r"(?i)\s*https?://", url):
        return
    add_url(url)
    bare = url.strip()
    if "://" in bare:
        bare = bare.split("://", 1)[1]
    fixed = redact(f"http://{bare}")
    where = how_to_set("judge_base_url", fixed) if base_url else f"OPENAI_BASE_URL={fixed}"
    raise ConfigError(
        f"the judge's base URL {redact(url)!r} does not start with http:// or https://: set {where}"
    )


def check_azure_settings(
    endpoint: str | None = None, api_version: str | None = None, how_to_set: HowToSet = by_environment
) -> None:
    """Raise :class:`ConfigError` when an Azure judge could not be built: no endpoint (``endpoint``
    or ``AZURE_OPENAI_ENDPOINT``) or no API version (``api_version`` or ``OPENAI_API_VERSION``).

    The plugin calls it at startup, so a run stops with one usage error instead of failing every test.
    """
    check_azure(
        endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT") or None,
        api_version or os.environ.get("OPENAI_API_VERSION") or None,
        None,
        how_to_set,
    )


def check_azure(
    endpoint: str | None, api_version: str | None, base_url: str | None, how_to_set: HowToSet
) -> None:
    """Raise :class:`ConfigError` naming what to set when the Azure settings are incomplete."""
    add_url(endpoint)  # the message may quote them: their secrets are masked
    add_url(base_url)
    missing = []
    if not endpoint:
        missing.append(
            f"the endpoint ({how_to_set('judge_base_url', 'https://<resource>.openai.azure.com')} "
            "or AZURE_OPENAI_ENDPOINT)"
        )
    if not api_version:
        missing.append("the API version (OPENAI_API_VERSION, e.g. 2024-10-21)")
    if missing:
        raise ConfigError("the Azure OpenAI judge needs " + " and ".join(missing))
    assert endpoint is not None  # for mypy: it is among the missing otherwise
    resource = _azure_resource(endpoint)
    if resource is not None:
        # Azure's portal shows a deployment's "target URI", the address of one request: the client
        # adds /openai/deployments/<model>/chat/completions and the api-version to the endpoint, so
        # that one would be asked at .../chat/completions?api-version=.../openai/deployments/..., and
        # its 404 would speak of the model and a base URL.
        raise ConfigError(
            f"the Azure OpenAI endpoint {redact(endpoint)!r} is the address of a request, not of the "
            "resource: the client adds /openai/deployments/<deployment>/chat/completions and the API "
            f"version itself. Set {how_to_set('judge_base_url', redact(resource))} (or "
            "AZURE_OPENAI_ENDPOINT), the API version in OPENAI_API_VERSION and the deployment's name "
            "as the judge model"
        )
    if base_url:
        # The SDK would build its own URL from the endpoint and ignore or reject this one.
        raise ConfigError(
            f"the Azure OpenAI judge takes an endpoint, not a base URL ({base_url!r}): "
            "pass it as azure_endpoint"
        )


def _azure_resource(endpoint: str) -> str | None:
    """The resource's address when ``endpoint`` is the address of a request (a path with an
    ``openai`` part, or an ``api-version`` in the query), else None."""
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    segments = parts.path.split("/")
    lowered = [segment.lower() for segment in segments]
    if "openai" not in lowered and "api-version" not in parts.query.lower():
        return None
    path = "/".join(segments[: lowered.index("openai")] if "openai" in lowered else segments).rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{path}"


def http_client_kwargs(openai: Any, on_response: Callable[[Any], Awaitable[None]]) -> dict[str, Any]:
    """The HTTP client of a judge's ``openai`` client: the SDK's own ``DefaultAsyncHttpxClient`` (its
    defaults), calling ``on_response`` as each response's status line and headers arrive, before
    its body: a server that has begun to answer, however slowly, is not one that answers nothing.

    Made here for every release: those before 1.55.3 would build their default client with httpx's
    ``proxies`` argument, which httpx 0.28 removed (with a current httpx, every client they create
    fails with a ``TypeError``); ``DefaultAsyncHttpxClient`` is never built that way.
    """
    return {"http_client": openai.DefaultAsyncHttpxClient(event_hooks={"response": [on_response]})}
