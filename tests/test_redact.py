"""No credential in any message: URL user-info, configured API keys, bearer tokens, sk- keys."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from judge_requests import make_request

from pytest_ragmetrics.errors import InvalidSample, JudgeUnavailable
from pytest_ragmetrics.judge.openai_judge import OpenAIJudge
from pytest_ragmetrics.redact import add_secret, redact, redact_json

KEY = "k3y-0f-the-judge-123456"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("the LLM judge at http://user:" + KEY + "@judge.example/v1 is unavailable", KEY),
        ("https://" + KEY + "@judge.example/v1", KEY),
        ('{"error": "invalid Authorization: Bearer abc.def-ghi_jkl"}', "abc.def-ghi_jkl"),
        ("header api-key: 0123456789abcdef was rejected", "0123456789abcdef"),
        ('"api_key": "0123456789abcdef"', "0123456789abcdef"),
        ("Incorrect API key provided: sk-proj-AbCdEf0123456789.", "sk-proj-AbCdEf0123456789"),
    ],
)
def test_redact_masks_credentials(text, secret):
    out = redact(text)
    assert secret not in out
    assert "***" in out


def test_redact_masks_the_configured_key_values_wherever_they_appear(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-secret-987654")
    out = redact(f"server said: key {KEY} and azure-secret-987654 are not valid")
    assert out == "server said: key *** and *** are not valid"


def test_redact_leaves_ordinary_text_alone(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "x")  # too short to be a key: not scrubbed everywhere
    text = "context_recall of sample 'x' = 0.500 at http://127.0.0.1:8000/v1 (task-sk-1)"
    assert redact(text) == text
    assert redact("") == ""


def test_redact_json_keeps_the_structure():
    value = {"reason": "Bearer abcdefghijkl", "n": 3, "items": ["http://u:p4ssw0rd@h/", None]}
    assert redact_json(value) == {"reason": "Bearer ***", "n": 3, "items": ["http://***@h/", None]}


def test_every_package_error_is_redacted(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert KEY not in str(InvalidSample(f"sample mentions {KEY}"))


def test_a_key_given_in_code_is_scrubbed_too():
    add_secret("given-in-code-key-42")
    assert redact("it was given-in-code-key-42") == "it was ***"


def _judge_error(judge: OpenAIJudge) -> str:
    async def go() -> str:
        try:
            await judge.judge(make_request())
        except JudgeUnavailable as exc:
            return str(exc)
        finally:
            await judge.aclose()
        raise AssertionError("the judge answered")

    return asyncio.run(go())


def test_judge_errors_never_show_the_credentials_of_the_base_url(fake_judge_server, monkeypatch):
    """OPENAI_BASE_URL=http://user:KEY@host/v1: every judge error used to print the key."""
    monkeypatch.setenv("OPENAI_BASE_URL", fake_judge_server.base_url.replace("//", f"//user:{KEY}@"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-dummy-key-000")
    fake_judge_server.fail_next(500, times=10)
    message = _judge_error(OpenAIJudge("m", max_retries=1, retry_backoff=0.01))
    assert "HTTP 500" in message
    assert KEY not in message
    assert "http://***@127.0.0.1" in message


def test_a_server_error_echoing_the_authorization_header_is_scrubbed(fake_judge_server):
    fake_judge_server.fail_next(
        400, body={"error": {"message": f"bad request; headers: Authorization: Bearer {KEY}", "type": "x"}}
    )
    judge = OpenAIJudge("m", api_key=KEY, base_url=fake_judge_server.base_url, max_retries=0)
    message = _judge_error(judge)
    assert "HTTP 400" in message
    assert KEY not in message


def test_cache_warnings_are_redacted(tmp_path, monkeypatch):
    from pytest_ragmetrics.errors import RagMetricsWarning
    from pytest_ragmetrics.judge.base import ScriptedJudge
    from pytest_ragmetrics.judge.cache import CachedJudge

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    blocker = tmp_path / f"cache-{KEY}"
    blocker.write_text("a file where the cache directory should be")
    judge = CachedJudge(lambda: ScriptedJudge(lambda r: {"reason": "r", "useful": True}), cache_dir=blocker)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(judge.judge(make_request()))
    messages = [str(w.message) for w in caught if issubclass(w.category, RagMetricsWarning)]
    assert messages and all(KEY not in m for m in messages)


def test_redact_json_copies_only_what_it_changes():
    clean = {"scores": [0.5, 1.0], "reason": "fine"}
    value: dict[str, Any] = {"clean": clean, "items": ["ok", {"reason": "Bearer sk-abcdefghijkl"}]}
    out = redact_json(value)
    assert out == {"clean": clean, "items": ["ok", {"reason": "Bearer ***"}]}
    assert out["clean"] is clean  # nothing to scrub: not copied
    assert value["items"][1] == {"reason": "Bearer sk-abcdefghijkl"}  # the input is left as it was
    assert redact_json(clean) is clean


def _every_string_redacted(value: Any) -> Any:
    """The reference: redact() applied to every string, containers rebuilt."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {_every_string_redacted(k): _every_string_redacted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_every_string_redacted(v) for v in value]
    return value


@pytest.mark.parametrize(
    "text",
    [
        "a token after a line break: Bearer\nabcdefghijkl",  # JSON writes the break as \\n
        'quoted header "api-key":\t"0123456789abcdef"',
        "a URL on its own line:\nhttps://user:pa55word@judge.example/v1",
        "a key after a tab:\tsk-proj-AbCdEf0123456789",
        'a key with a quote in it: se"cr\\et-value-42',
        "BEARER  QWERTYUIOP and Api_Key=zxcvbnmasdf",
    ],
)
def test_redact_json_scrubs_what_redact_scrubs_whatever_json_escapes(monkeypatch, text):
    monkeypatch.setenv("AZURE_OPENAI_AD_TOKEN", 'se"cr\\et-value-42')
    value = {"results": [{"reason": text, "n": 1.5, "tags": ["ok", None, True]}], text: "as a key too"}
    out = redact_json(value)
    assert out == _every_string_redacted(value)
    assert out != value  # each text holds something to scrub


def test_the_letters_beyond_ascii_that_patterns_fold_to_ascii_are_all_known():
    """The report's one-search check relies on them: any other letter cannot complete a pattern."""
    import re
    import sys

    from pytest_ragmetrics.redact import FOLDS_TO_ASCII

    folding = {chr(c) for c in range(128, sys.maxunicode + 1) if re.fullmatch("(?i)[a-z]", chr(c))}
    assert folding == set(FOLDS_TO_ASCII)


@pytest.mark.parametrize(
    "text", ["ap\u0131-key: 0123456789abcdef", "bearer \u212aEY0123456789", "Api_\u212aey=abcdefghij"]
)
def test_redact_json_scrubs_patterns_spelled_with_letters_that_fold_to_ascii(text):
    value = {"reason": text}
    assert redact_json(value) == {"reason": redact(text)} != value


def test_redact_masks_the_query_values_named_like_a_credential_and_keeps_the_others():
    text = (
        "the judge at https://gw.example/v1?key=q-secret-1&api-version=2024-10-21&flag is unavailable? "
        "https://s3.example/b/o?X-Amz-Signature=0a1b2c3d&X-Amz-Expires=300&access_token=t0k-3n"
    )
    assert redact(text) == (
        "the judge at https://gw.example/v1?key=***&api-version=2024-10-21&flag is unavailable? "
        "https://s3.example/b/o?X-Amz-Signature=***&X-Amz-Expires=300&access_token=***"
    )


def test_a_url_a_sample_quotes_keeps_its_query_in_the_report():
    chunk = {"contexts": ["See https://docs.example.com/search?q=manual&page=2 for the manual."]}
    assert redact_json(chunk) == chunk


def test_the_secrets_of_a_base_url_are_its_userinfo_query_values_and_key_shaped_path_segments():
    from pytest_ragmetrics.redact import url_secrets

    url = "https://me:pa55word@gw.example/v1/Ab12Cd34Ef56Gh78Ij/openai/gpt-4o-mini-2024-07-18?token=t0k3n%2Bx"
    assert set(url_secrets(url)) == {"me:pa55word", "pa55word", "Ab12Cd34Ef56Gh78Ij", "t0k3n%2Bx", "t0k3n+x"}
    assert url_secrets("https://judge.example/openai/deployments/Meta-Llama-3.1-70B-Instruct/v1") == ()
    assert url_secrets("https://res.openai.azure.com/openai?api-version=2024-10-21") == ()


def test_a_letters_only_key_in_a_base_url_path_is_masked_and_a_named_segment_is_not():
    """A generated key of letters alone (``/v1/AbXkQwErTyUiOpLmNb/``) was printed whole: only a run
    with digits in it looked generated. Its case changes at random; a name's, once a word."""
    from pytest_ragmetrics.redact import url_secrets

    for key in ("AbXkQwErTyUiOpLmNbVc", "qWeRtYuIoPaSdFgH", "xKpQmZrTbWnYcLvJhDfG"):
        assert url_secrets(f"https://gw.example/v1/{key}/openai") == (key,), key
    named = (
        "v1/openai/deployments/my-model/chat/completions",
        "openai/deployments/MyProductionDeployment",
        "AzureOpenAIDeployment/HTTPSProxyOpenAIGateway",
        "serving-endpoints/databricks-meta-llama-3-70b-instruct/invocations",
        "api/OpenAICompatibleEndpoints/ChatCompletions",
    )
    for path in named:
        assert url_secrets(f"https://gw.example/{path}") == (), path


#: A gateway that takes its key in the base URL's path, user-info and query; the API key is another.
GATEWAY_SECRETS = ("gWpAth5ecret0123456789", "us3rinfo-secret", "qu3ry-secret")


def _gateway_url(server_url: str, secrets: tuple[str, ...]) -> str:
    path_key, password, query_key = secrets
    return server_url.replace("//", f"//gw:{password}@") + f"/{path_key}/?token={query_key}"


@pytest.mark.parametrize("given_in", ["ini", "env"])
def test_a_key_in_the_judge_base_url_reaches_no_message_or_report(pytester, serve, monkeypatch, given_in):
    """A gateway's base URL (https://gw.example/v1/KEY/) was printed whole in every judge error, in
    the terminal and in the reports, when the key in it was not also the API key."""
    secrets = tuple(f"{given_in}-{secret}" for secret in GATEWAY_SECRETS)
    server = serve(lambda body: {})
    server.fail_next(500, times=100)
    url = _gateway_url(server.base_url, secrets)
    ini = "[pytest]\nrag_max_retries = 0\nrag_cache = off\n"
    if given_in == "ini":
        monkeypatch.delenv("RAGMETRICS_JUDGE_BASE_URL")
        ini += f"rag_judge_base_url = {url}\n"
    else:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", url)
    pytester.makeini(ini)
    pytester.makepyfile(
        """
        from pytest_ragmetrics import RagSample, assert_context_precision

        def test_precision():
            sample = RagSample("Where is Paris?", ["Paris is in France."], ground_truth="In France.")
            assert assert_context_precision(sample) >= 0.5
        """
    )
    result = pytester.runpytest("-rA", "--rag-report", "--rag-report-json=r.json", "--rag-report-md=r.md")
    result.assert_outcomes(failed=1)
    shown = "\n".join(
        [
            result.stdout.str(),
            result.stderr.str(),
            *(pytester.path.joinpath(f).read_text() for f in ("r.json", "r.md")),
        ]
    )
    assert "is unavailable for context_precision" in shown
    assert "/v1/***/?token=***" in shown
    assert not [secret for secret in secrets if secret in shown]
