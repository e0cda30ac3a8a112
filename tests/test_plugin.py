"""The pytest plugin through real pytest runs (pytester), judged over HTTP by the fake judge server."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap
from typing import Any
from unittest.mock import ANY

import pytest

# In-process pytester runs drop modules first imported inside them; importing the package's modules
# here keeps one copy of each class (RagSample...) for the outer and the inner runs.
import pytest_ragmetrics.assertions
import pytest_ragmetrics.engine
import pytest_ragmetrics.judge.cache
import pytest_ragmetrics.judge.openai_judge
import pytest_ragmetrics.judge.store
import pytest_ragmetrics.loaders
import pytest_ragmetrics.metrics.builtin
import pytest_ragmetrics.report.html
import pytest_ragmetrics.report.markdown
import pytest_ragmetrics.report.terminal
import pytest_ragmetrics.text
from pytest_ragmetrics import Settings
from pytest_ragmetrics._run import set_digest
from pytest_ragmetrics.errors import ConfigError
from pytest_ragmetrics.settings import OPTIONS, OPTIONS_BY_NAME, resolve
from pytest_ragmetrics.testing import FakeJudgeServer

pytest_plugins = ["pytester"]


def keyword_judge(body):
    """A judge that decides by keywords: chunks about Paris or Europe are useful and relevant."""
    payload = json.loads(body["messages"][-1]["content"])
    schema_name = body["response_format"]["json_schema"]["name"]
    good = ("Paris", "Europe")
    if schema_name == "context_precision":
        useful = any(w in payload["chunk"] for w in good)
        return {"reason": "names Paris or Europe" if useful else "off topic", "useful": useful}
    if schema_name == "context_recall":
        joined = " ".join(payload["contexts"].values())
        out = {}
        for i, sentence in payload["reference_sentences"].items():
            ok = all(w in joined for w in good if w in sentence)
            out[f"sentence_{i}"] = {"reason": "found" if ok else "no context says so", "attributed": ok}
        return out
    if schema_name == "context_relevance_sentences":
        chosen = [int(i) for i, s in payload["sentences"].items() if any(w in s for w in good)]
        return {"reason": "keyword sentences", "relevant_sentences": chosen}
    rating = 2 if "Paris" in payload["chunk"] else 1 if "Europe" in payload["chunk"] else 0
    return {"reason": f"rating {rating}", "rating": rating}


SAMPLES = """
from pytest_ragmetrics import RagSample

GOOD = RagSample("Where is France and what is its capital?",
                 ["France is in Western Europe.", "Paris is the capital of France."],
                 ground_truth="France is in Western Europe. Its capital is Paris.", id="good")
PARTIAL = RagSample("Where is France and what is its capital?",
                    ["The cuisine is famous.", "France is in Western Europe."],
                    ground_truth="France is in Western Europe. Its capital is Paris.", id="partial")
"""


@pytest.fixture
def judge_server(monkeypatch):
    with FakeJudgeServer(keyword_judge) as server:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        monkeypatch.delenv("NO_COLOR", raising=False)
        yield server


@pytest.fixture
def project(pytester, judge_server):
    pytester.makepyfile(samples=SAMPLES)
    pytester.makeini("[pytest]\n")
    return pytester


def test_help_lists_the_options_in_one_group(pytester):
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "ragmetrics: retrieval and answer metrics judged by an LLM:",
            "*--rag-report*",
            "*--rag-report-json=PATH*",
            "*--rag-report-md=PATH*",
            "*--rag-report-html=PATH*",
            "*--rag-judge-model=NAME*",
            "*--rag-concurrency=N*",
            "*--rag-cache=MODE*",
            "*--rag-cache-dir=PATH*",
            "*--rag-store-dir=PATH*",
            "*--rag-gate=GATE*",
        ]
    )
    result.stdout.fnmatch_lines(["*rag_gates (linelist)*"])


NUMERIC_INI = pytest.version_tuple >= (8, 4)


def test_help_shows_ini_keys_with_their_types(pytester):
    result = pytester.runpytest("--help")
    number, integer = ("float", "int") if NUMERIC_INI else ("string", "string")
    result.stdout.fnmatch_lines(
        [
            "*rag_report (bool)*",
            "*rag_judge_model (string)*",
            f"*rag_temperature ({number})*",
            "*rag_seed (string)*",  # an integer or the word none
            f"*rag_concurrency ({integer})*",
            f"*rag_timeout ({number})*",
            f"*rag_price_input ({number})*",
        ]
    )


@pytest.mark.parametrize(
    ("ini", "args", "message"),
    [
        ("rag_concurrency = many", [], "*ragmetrics: rag_concurrency must be an integer*many*) (in tox.ini)"),
        ("rag_timeout = soon", [], "*ragmetrics: rag_timeout must be a number*soon*) (in tox.ini)"),
        ("rag_concurrency = 0", [], "*ragmetrics: rag_concurrency must be at least 1; got*0* (in tox.ini)"),
        ("rag_judge_n = 100000", [], "*ragmetrics: rag_judge_n must be at most 128; got*100000* (in tox.ini)"),
        ("", ["--rag-judge-n", "129"], "*--rag-judge-n must be at most 128; got '129'*"),
        ("rag_report = maybe", [], "*ragmetrics: rag_report must be true or false*maybe* (in tox.ini)"),
        (
            "rag_gates = context_recall mean >= 2",
            [],
            "*ragmetrics: invalid ragmetrics gate 'context_recall mean >= 2': * (in tox.ini)",
        ),
        (
            "",
            ["--rag-gate", "context_recall average >= 0.9"],
            "*invalid ragmetrics gate*context_recall average >= 0.9*",
        ),
        (
            "",
            ["--rag-cache", "sometimes"],
            "*cache must be one of readwrite, replay, refresh, off; got 'sometimes'*",
        ),
        ("", ["--rag-concurrency", "zero"], "*--rag-concurrency must be an integer; got 'zero'*"),
        ("", ["--rag-gate", "context_magic mean >= 0.1"], "*unknown metric 'context_magic'*"),
    ],
)
def test_a_bad_setting_in_the_ini_or_on_the_command_line_is_a_usage_error_naming_it(pytester, ini, args, message):
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize(
    ("ini", "env", "args", "message"),
    [
        ("", None, ["--rag-store-dir=judgments"], "*: --rag-store-dir: the judgment store */judgments is a file;*"),
        ("rag_store_dir = judgments", None, [], "*: rag_store_dir: the judgment store */judgments is a file;* (in tox.ini)"),
        ("", "judgments", [], "*: RAGMETRICS_STORE_DIR: the judgment store */judgments is a file;*"),
        ("", None, ["--rag-store-dir=judgments/v2"], "*/judgments/v2 lies under */judgments, which is a file;*"),
    ],
)
def test_a_store_dir_naming_a_file_is_a_usage_error_before_any_test(pytester, monkeypatch, ini, env, args, message):
    """Found at the start, not when the run's judgments are recorded at its end and lost."""
    pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile("def test_plain():\n    pass\n")
    (pytester.path / "judgments").write_text("a file, not a directory\n")
    if env is not None:
        monkeypatch.setenv("RAGMETRICS_STORE_DIR", env)
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message.replace(";*", "; the store is a directory of shard files: choose another path*")])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert (pytester.path / "judgments").read_text() == "a file, not a directory\n"


def test_a_store_dir_whose_name_the_file_system_refuses_is_a_usage_error_naming_it(pytester):
    """A name longer than the file system allows made ``Path.is_dir`` raise: an INTERNALERROR."""
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest(f"--rag-store-dir={'g' * 300}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*: --rag-store-dir: the judgment store *ggg cannot be used (*): choose another path*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_a_refused_value_names_its_setting_as_written_where_it_was_given():
    """The error carries the setting's name, so the run need not read it back out of the message."""
    from pytest_ragmetrics.settings import resolve

    for given, setting in (
        ({"ini": {"concurrency": "many"}}, "rag_concurrency"),
        ({"env": {"RAGMETRICS_TIMEOUT": "soon"}}, "RAGMETRICS_TIMEOUT"),
        ({"cli": {"report": "maybe"}}, "--rag-report"),
        ({"overrides": {"judge_model": ["gpt-4o"]}}, "judge_model"),
    ):
        with pytest.raises(ConfigError) as raised:
            resolve(**given)
        assert raised.value.setting == setting
    with pytest.raises(ConfigError) as raised:
        Settings(concurrency=0)
    assert raised.value.setting == "Settings.concurrency"


@pytest.mark.parametrize(
    ("option", "what"), [("--rag-gate", "a gate"), ("--rag-judge-agreement", "a floor")]
)
def test_an_empty_gate_on_the_command_line_is_a_usage_error(pytester, option, what):
    """``--rag-gate="$GATE"`` with the variable unset ran with no gate at all, and passed; report
    merge --gate refuses it, and so does the run now."""
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest(f"{option}= ")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*ragmetrics: {option} is empty: give {what}, or leave the option out"])


def test_an_empty_environment_variable_is_a_usage_error_not_the_ini_s_gates_dropped(pytester, monkeypatch):
    """``RAGMETRICS_GATES=$GATES`` with the CI variable unset gated nothing, and the run passed."""
    pytester.makeini("[pytest]\nrag_gates = context_recall mean >= 0.9\n")
    monkeypatch.setenv("RAGMETRICS_GATES", "")
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*ragmetrics: RAGMETRICS_GATES is set but empty: give it a value, or unset the variable (*"]
    )
    monkeypatch.delenv("RAGMETRICS_GATES")
    result = pytester.runpytest("-o", "rag_gates=")  # how the ini's gates are cleared for one run
    assert result.ret == pytest.ExitCode.OK


@pytest.mark.parametrize("option", [o for o in OPTIONS if o.env], ids=lambda o: o.env_name)
def test_every_setting_s_variable_set_but_empty_is_refused_naming_it(option):
    """Empty is neither unset (the ini's value) nor "none" (no gates, no cap, no baseline), for any kind."""
    for value in ("", "  "):
        with pytest.raises(ConfigError, match=f"^{option.env_name} (is set but empty|is empty|must)") as raised:
            resolve(ini={option.name: None}, env={option.env_name: value})
        assert raised.value.setting == option.env_name


def test_an_empty_path_or_name_on_the_command_line_is_a_usage_error_not_the_ini_s_value_cleared(pytester):
    """``--rag-store-dir="$STORE"`` with the variable unset ran without the ini file's store, silently,
    as an empty ``RAGMETRICS_STORE_DIR`` no longer does."""
    pytester.makeini("[pytest]\nrag_store_dir = store\nrag_relevance_models = a, b\n")
    pytester.makepyfile("def test_plain():\n    pass\n")
    for name in ("store_dir", "relevance_models", "judge_base_url", "report_json", "baseline"):
        option = OPTIONS_BY_NAME[name]
        result = pytester.runpytest(f"{option.cli_name}=")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, name
        result.stderr.fnmatch_lines(
            [
                f"*ragmetrics: {option.cli_name} is empty: give it a value, or leave the option out (an "
                f"empty one does not clear {option.ini_name}; -o {option.ini_name}= does)"
            ]
        )
    assert pytester.runpytest("-o", "rag_store_dir=").ret == pytest.ExitCode.OK


@pytest.mark.parametrize("option", [o for o in OPTIONS if o.cli and not o.flag], ids=lambda o: o.cli_name)
def test_every_option_given_empty_is_refused_naming_it(option):
    for value in ("", "  "):
        with pytest.raises(ConfigError, match=f"^{option.cli_name} (is empty|must)") as raised:
            resolve(ini={option.name: None}, cli={option.name: value})
        assert raised.value.setting == option.cli_name


def test_a_bad_gate_from_the_environment_is_not_said_to_be_in_the_ini_file(pytester, monkeypatch):
    pytester.makeini("[pytest]\nrag_gates = context_recall mean >= 0.5\n")
    monkeypatch.setenv("RAGMETRICS_GATES", "context_recall mean >= 2")
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ragmetrics: invalid ragmetrics gate 'context_recall mean >= 2': *"])
    assert "(in tox.ini)" not in result.stderr.str()


def test_a_text_setting_given_a_toml_boolean_is_a_usage_error_and_writes_no_file(pytester):
    """``rag_report_json = true`` in pyproject.toml reached the run as the text "True": the report
    went to a file named ``True``. A TOML value that is not a string is refused, naming the key."""
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nrag_report_json = true\nrag_save_baseline = 5\n')
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ragmetrics: rag_report_json must be text, in quotes; got true (in pyproject.toml)"])
    assert not (pytester.path / "True").exists() and not (pytester.path / "5").exists()
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_relevance_models_may_be_a_toml_list_of_names_but_not_of_numbers(pytester):
    """``rag_relevance_models = ["a", "b"]`` drew pytest's warning that a list for a string option
    will be refused; ``5`` or ``[1, 2]`` named models "5", "1" and "2"."""
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nrag_relevance_models = ["judge-a", "judge-b, judge-c"]\n')
    pytester.makepyfile(
        "import pytest_ragmetrics.plugin as plugin\n"
        "def test_models(pytestconfig):\n"
        "    models = plugin._session(pytestconfig).settings.relevance_models\n"
        "    assert models == ('judge-a', 'judge-b', 'judge-c')\n"
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert "not a string" not in result.stdout.str() + result.stderr.str()  # pytest's warning
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\nrag_relevance_models = [1, 2]\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ragmetrics: rag_relevance_models must be text, in quotes; got [[]1, 2] (in pyproject.toml)"])


def test_a_text_setting_given_a_list_is_refused_naming_it():
    with pytest.raises(ConfigError, match=r"Settings\.judge_model must be text, got \['gpt-4o'\]"):
        Settings(judge_model=["gpt-4o"])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"Settings\.report_json must be the path of the file to write, got True"):
        Settings(report_json=True)  # type: ignore[arg-type]
    assert Settings(cache_dir=pathlib.Path("judgments")).cache_dir == "judgments"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("rag_concurrency=0", "rag_concurrency must be at least 1; got*0*"),
        ("rag_gates=context_precison mean >= 0.8", "invalid ragmetrics gate 'context_precison mean >= 0.8'*"),
        ("rag_concurency=2", "unknown ragmetrics ini key rag_concurency; did you mean rag_concurrency? (given with -o)"),
    ],
    ids=["value", "gate", "unknown-key"],
)
def test_bad_override_ini_value_is_a_usage_error_before_the_first_test(pytester, override, message):
    """``-o rag_...=`` is an ini value too: checked at startup, not one failure per test (or never)."""
    pytester.makepyfile("""
        from pytest_ragmetrics import RagSample, assert_context_recall

        def test_plain():
            pass

        def test_rag():
            assert_context_recall(RagSample("q", ["c"], ground_truth="c")) >= 0.5
    """)
    result = pytester.runpytest("-o", override)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*ragmetrics: {message}"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_numeric_ini_values_reach_the_settings(pytester):
    pytester.makeini(
        "[pytest]\nrag_concurrency = 3\nrag_timeout = 2.5\nrag_seed = none\nrag_price_input = 0.15\n"
    )
    pytester.makeconftest("""
        def pytest_sessionstart(session):
            from pytest_ragmetrics.plugin import session_key
            s = session.config.stash[session_key].settings
            print("SETTINGS", s.concurrency, s.timeout, s.seed, s.price_input)
    """)
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest("-s")
    result.stdout.fnmatch_lines(["SETTINGS 3 2.5 None 0.15"])


def test_disabled_plugin_gives_a_clean_run(pytester):
    pytester.makepyfile("def test_plain():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest("-p", "no:ragmetrics", "--strict-markers")
    result.assert_outcomes(passed=1)
    assert "ragmetrics" not in result.stdout.str()
    assert pytester.runpytest("-p", "no:ragmetrics", "--rag-report").ret == pytest.ExitCode.USAGE_ERROR


def test_unused_plugin_loads_only_its_hooks_and_options_and_makes_no_session(pytester):
    """A run that never uses ragmetrics (a fixture of its own, a skipped test, -k) loads the plugin's
    hooks, its option table (not the options' converters) and what every run records, and no
    session, settings or heavy package; pytest rewrites none of them (PYTEST_DONT_REWRITE)."""
    pytester.makeconftest("import pytest\n\n@pytest.fixture\ndef number():\n    return 3\n")
    pytester.makepyfile(
        test_plain="""
        import pytest

        def test_plain(number):
            assert number == 3

        @pytest.mark.skip(reason="not today")
        def test_skipped():
            pass

        def test_deselected():
            pass
        """
    )
    code = textwrap.dedent("""
        import sys, pytest

        class Probe:
            @pytest.hookimpl(trylast=True)
            def pytest_sessionfinish(self, session):
                from pytest_ragmetrics.plugin import session_key

                pm = session.config.pluginmanager
                print("RECORDER", pm.get_plugin("ragmetrics-recorder") is not None)
                print("SESSION", session.config.stash.get(session_key, None) is not None)

        rc = pytest.main(["-q", "-p", "no:cacheprovider", "-k", "not deselected"], plugins=[Probe()])
        print("LOADED", sorted(m for m in sys.modules if m.startswith("pytest_ragmetrics")))
        # pytest's assertion rewriting puts "@pytest_ar" in a module's globals: none of ours asks for it.
        print("REWRITTEN", [m for m in sys.modules if m.startswith("pytest_ragmetrics") and "@pytest_ar" in vars(sys.modules[m])])
        print("HEAVY", sorted(m for m in ("openai", "nltk", "diskcache", "httpx", "httpx2") if m in sys.modules))
        sys.exit(rc)
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMETRICS_")}
    out = subprocess.run([sys.executable, "-c", code], cwd=pytester.path, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed, 1 skipped, 1 deselected" in out.stdout
    assert "RECORDER False" in out.stdout
    assert "SESSION False" in out.stdout
    loaded = {"", ".plugin", "._scope", "._suite", ".options", ".hookspecs"}
    assert f"LOADED {sorted('pytest_ragmetrics' + m for m in loaded)}" in out.stdout
    assert "HEAVY []" in out.stdout
    assert "REWRITTEN []" in out.stdout


def test_the_suite_record_and_its_file_digests_are_made_only_for_a_report_that_is_read(pytester, monkeypatch):
    """Which tests ran and the digests of their files are for ``report merge``: a run whose report
    nobody reads hashes none of its files; one that writes its report records them."""
    for name in [k for k in os.environ if k.startswith("RAGMETRICS_")]:
        monkeypatch.delenv(name)
    pytester.makeconftest("""
        import json, pathlib
        import pytest
        from pytest_ragmetrics.plugin import session_key

        @pytest.hookimpl(trylast=True)
        def pytest_sessionfinish(session):
            state = session.config.stash[session_key]
            suite = state.final_report["summary"].get("suite")
            pathlib.Path("kept.json").write_text(json.dumps([suite is not None, state.suite.files]))
    """)
    pytester.makepyfile(
        test_labels="""
        from pytest_ragmetrics import RagSample, assert_metric

        def test_scores():
            sample = RagSample("q", ["a", "b"], context_ids=["d1", "d2"], reference_context_ids=["d1"])
            assert_metric(sample, "mrr") >= 1.0
        """
    )
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=1)
    assert json.loads((pytester.path / "kept.json").read_text()) == [False, None]
    pytester.runpytest("-p", "no:randomly", "--rag-report-json=report.json").assert_outcomes(passed=1)
    assert json.loads((pytester.path / "kept.json").read_text()) == [True, {"test_labels.py": ANY}]
    suite = json.loads((pytester.path / "report.json").read_text())["summary"]["suite"]
    assert (suite["collected"], suite["ran"], list(suite["files"])) == (1, 1, ["test_labels.py"])


def test_a_run_that_first_uses_the_plugin_late_reports_every_test_it_ran(pytester, monkeypatch):
    """Nothing configured: the session is made by the test that scores, and its report still
    counts the tests collected, deselected, skipped and run before it."""
    for name in [k for k in os.environ if k.startswith("RAGMETRICS_")]:
        monkeypatch.delenv(name)
    pytester.makeconftest("""
        import json, pathlib

        def pytest_ragmetrics_report(report):
            pathlib.Path("suite.json").write_text(json.dumps(report["summary"]["suite"]))
    """)
    pytester.makepyfile(
        test_late="""
        import pytest
        from pytest_ragmetrics import RagSample, assert_metric
        from pytest_ragmetrics.plugin import session_key

        def test_a_plain(request):
            assert request.config.stash.get(session_key, None) is None

        @pytest.mark.skip(reason="not today")
        def test_b_skipped():
            pass

        def test_c_deselected():
            pass

        def test_d_scores(request):
            sample = RagSample("q", ["a", "b"], context_ids=["d1", "d2"], reference_context_ids=["d1"])
            assert_metric(sample, "mrr") >= 1.0
            assert request.config.stash[session_key].suite.ran == {
                "test_late.py::test_a_plain", "test_late.py::test_b_skipped", "test_late.py::test_d_scores"
            }
        """
    )
    result = pytester.runpytest("-p", "no:randomly", "-k", "not deselected")
    result.assert_outcomes(passed=2, skipped=1, deselected=1)
    suite = json.loads((pytester.path / "suite.json").read_text())
    ran = ["test_late.py::test_a_plain", "test_late.py::test_b_skipped", "test_late.py::test_d_scores"]
    assert (suite["collected"], suite["ran"]) == (4, 3)
    assert suite["ran_digest"] == f"{set_digest(ran):064x}"
    assert suite["collected_digest"] == f"{set_digest([*ran, 'test_late.py::test_c_deselected']):064x}"


def test_marker_is_registered_for_strict_markers(pytester):
    pytester.makepyfile("""
        import pytest
        @pytest.mark.ragmetrics(judge_model="m")
        def test_marked():
            pass
    """)
    pytester.runpytest("--strict-markers").assert_outcomes(passed=1)


def test_a_judges_reason_reaches_the_terminal_with_its_control_characters_escaped(project, judge_server):
    """A judge's reason holding ESC (a colour, a cleared screen) or a backspace is shown escaped, as
    the chunk's text beside it is, in the failure's message and in the report: the judge's words
    cannot rewrite the terminal."""

    def escaping(body: dict[str, Any]) -> dict[str, Any]:
        chunk = json.loads(body["messages"][-1]["content"])["chunk"]
        return {"reason": "off topic\x1b[2J\x08", "useful": "Paris" in chunk}

    judge_server.responder = escaping
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import RagSample, assert_context_precision

        def test_precision():
            sample = RagSample("Where?", ["Bread\\x1b[31m is cheap.", "Paris is in France."], "Paris.", id="s")
            assert_context_precision(sample) > 0.9
    """
    )
    result = project.runpytest("--rag-report", "-vv")
    result.assert_outcomes(failed=1)
    assert "\x1b" not in result.stdout.str() and "\x08" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "E  *- chunk * [[]not useful[]] 'Bread\\x1b[[]31m is cheap.'",
            "E  *judge: off topic\\x1b[[]2J\\x08",
            "*chunk * 'Bread\\x1b[[]31m is cheap.': not useful - off topic\\x1b[[]2J\\x08",
        ]
    )


def test_threshold_assertions_pass_and_fail_with_a_readable_block(project, judge_server):
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_precision, assert_context_recall, assert_context_relevance
        from samples import GOOD, PARTIAL

        def test_good():
            assert_context_recall(GOOD) >= 0.8
            assert assert_context_precision(GOOD) >= 0.7
            assert_context_relevance(GOOD, method="graded") >= 0.5

        def test_partial_recall():
            assert_context_recall(PARTIAL) >= 0.8

        def test_partial_precision():
            assert assert_context_precision(PARTIAL) > 0.9
    """
    )
    result = project.runpytest("--rag-report")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*context_recall of sample 'partial' = 0.500, expected >= 0.8",
            "*why: reference sentence 2 'Its capital is Paris.' is not supported by any context: no context says so",
            "*reference sentence 2 [[]not supported] 'Its capital is Paris.'",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*context_precision of sample 'partial' = 0.500, expected > 0.9",
            "*chunk 1 (rank 1) is not useful for the reference: off topic; the first useful chunk is at rank 2",
        ]
    )
    result.stdout.fnmatch_lines(
        ["*ragmetrics report*", "FAIL*0.500*>= 0.8*context_recall*judged*test_partial_recall"]
    )
    assert judge_server.request_count > 0


def test_second_run_makes_no_judge_request_and_reports_cached(project, judge_server):
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_recall, assert_context_relevance
        from samples import GOOD

        def test_good():
            assert_context_recall(GOOD) >= 0.8
            assert_context_relevance(GOOD, method="binary") >= 0.5
    """
    )
    project.runpytest("--rag-report").assert_outcomes(passed=1)
    first = judge_server.request_count
    assert first == 3  # recall: 1 request; binary relevance: 1 per chunk
    result = project.runpytest("-v", "--rag-report")
    result.assert_outcomes(passed=1)
    assert judge_server.request_count == first
    result.stdout.fnmatch_lines(
        ["PASS*1.000*>= 0.8*context_recall*cached*test_good", "*0 calls, 0 store hits, 3 cache hits, 0 reused*"]
    )


def test_dataset_level_assertions_list_the_worst_samples(project):
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_recall
        from samples import GOOD, PARTIAL

        def test_mean():
            assert_context_recall([GOOD, PARTIAL]) >= 0.75

        def test_min():
            assert_context_recall([GOOD, PARTIAL]).min() >= 0.6

        def test_quantile_and_pass_rate():
            check = assert_context_recall([GOOD, PARTIAL])
            assert check.quantile(0.5) >= 0.75
            assert check.pass_rate(0.8) >= 0.5
    """
    )
    result = project.runpytest()
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*context_recall min over 2 samples = 0.500, expected >= 0.6",
            "*worst samples:",
            "*- partial: 0.500  reference sentence 2*",
        ]
    )


def test_a_result_never_compared_warns_with_file_and_line(project):
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_recall
        from samples import GOOD

        def test_forgot_threshold():
            assert_context_recall(GOOD)
    """
    )
    result = project.runpytest("-W", "always")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        ["*test_rag.py:5*RagMetricsWarning: context_recall result was never compared*"]
    )


def test_gates_fail_the_session_and_say_by_how_much(project):
    project.makeini("""
        [pytest]
        rag_gates =
            context_recall mean >= 0.9
            context_relevance[graded] mean >= 0.5
    """)
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_recall, assert_context_relevance
        from samples import GOOD, PARTIAL

        def test_recall():
            assert_context_recall([GOOD, PARTIAL]) >= 0.5
            assert_context_relevance([GOOD, PARTIAL], method="graded") >= 0.1
    """
    )
    result = project.runpytest("--rag-report")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*FAIL*context_recall mean >= 0.9*value 0.750*margin -0.150*"])
    result.stdout.fnmatch_lines(["*PASS*context_relevance[[]graded] mean >= 0.5*"])


def test_gates_without_the_report_still_print_the_failure(project):
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_recall
        from samples import PARTIAL

        def test_recall():
            assert_context_recall(PARTIAL) >= 0.5
    """
    )
    result = project.runpytest("--rag-gate", "context_recall mean >= 0.9")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*ragmetrics gate failed: context_recall mean >= 0.9*"])


def test_precedence_ini_then_env_then_cli(pytester, monkeypatch):
    pytester.makeini("[pytest]\nrag_judge_model = from-ini\nrag_cache = off\n")
    pytester.makepyfile("""
        from pytest_ragmetrics.plugin import session_key
        def test_model(request):
            print("MODEL", request.config.stash[session_key].settings.judge_model)
    """)
    assert "MODEL from-ini" in pytester.runpytest("-s").stdout.str()
    monkeypatch.setenv("RAGMETRICS_JUDGE_MODEL", "from-env")
    assert "MODEL from-env" in pytester.runpytest("-s").stdout.str()
    assert "MODEL from-cli" in pytester.runpytest("-s", "--rag-judge-model", "from-cli").stdout.str()


def test_config_fixture_and_marker_override_per_test(project, judge_server):
    project.makeconftest("""
        import pytest
        @pytest.fixture
        def ragmetrics_config():
            return {"judge_model": "fixture-model"}
    """)
    project.makepyfile(
        test_rag="""
        import pytest
        from pytest_ragmetrics import assert_context_relevance
        from samples import GOOD

        def test_fixture_model():
            assert_context_relevance(GOOD) >= 0.5

        @pytest.mark.ragmetrics(judge_model="marker-model", method="binary")
        def test_marker_model():
            assert_context_relevance(GOOD) >= 0.5
    """
    )
    project.runpytest().assert_outcomes(passed=2)
    seen = {
        (r.body["model"], r.body["response_format"]["json_schema"]["name"]) for r in judge_server.requests
    }
    assert seen == {
        ("fixture-model", "context_relevance_graded"),
        ("marker-model", "context_relevance_sentences"),
    }


def test_a_score_in_a_fixture_teardown_follows_the_config_fixture(project, judge_server):
    """The test's settings are known from its setup on: a fixture may score after the test's body."""
    project.makeconftest("""
        import pytest
        from pytest_ragmetrics import assert_context_relevance
        from samples import GOOD

        @pytest.fixture
        def ragmetrics_config():
            return {"judge_model": "fixture-model"}

        @pytest.fixture
        def scored_after():
            yield
            assert_context_relevance(GOOD) >= 0.5
    """)
    project.makepyfile(test_rag="def test_body(scored_after):\n    pass\n")
    project.runpytest().assert_outcomes(passed=1)
    assert {r.body["model"] for r in judge_server.requests} == {"fixture-model"}


def test_a_suite_that_does_not_use_ragmetrics_sets_up_none_of_its_fixtures(pytester):
    """--setup-show of tests that never score, take a ragmetrics fixture or see an override of it."""
    pytester.makeconftest("""
        import pytest

        @pytest.fixture
        def number():
            return 3
    """)
    pytester.makepyfile(test_plain="def test_one(number):\n    assert number == 3\n\ndef test_two():\n    pass\n")
    result = pytester.runpytest("--setup-show", "--junitxml=junit.xml")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*SETUP    F number*"])
    assert "rag" not in "\n".join(line for line in result.outlines if "SETUP" in line or "TEARDOWN" in line)


def test_a_config_fixture_in_a_conftest_is_set_up_only_under_its_directory(pytester, judge_server):
    pytester.makepyfile(samples=SAMPLES)
    pytester.makeini("[pytest]\npythonpath = .\n")
    strict = pytester.mkdir("strict")
    (strict / "conftest.py").write_text(
        "import pytest\n\n@pytest.fixture\ndef ragmetrics_config():\n    return {'judge_model': 'strict-model'}\n"
    )
    test = "from pytest_ragmetrics import assert_context_relevance\nfrom samples import GOOD\n\n" \
        "def test_{0}():\n    assert_context_relevance(GOOD) >= 0.5\n"
    (strict / "test_strict.py").write_text(test.format("strict"))
    (pytester.mkdir("other") / "test_other.py").write_text(test.format("other"))
    result = pytester.runpytest("--setup-show", "-p", "no:randomly")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_other.py::test_other .", "*test_strict.py*", "*SETUP    F ragmetrics_config*"])
    assert {r.body["model"] for r in judge_server.requests} == {"strict-model", "gpt-4o-mini"}


def test_config_fixture_from_a_module_a_class_or_a_parameter_applies_only_where_it_is_given(
    project, judge_server
):
    """Tests that neither ask for ragmetrics_config nor see an override of it get the run's settings."""
    project.makepyfile(
        test_module="""
        import pytest
        from pytest_ragmetrics import assert_context_relevance
        from samples import GOOD

        @pytest.fixture
        def ragmetrics_config():
            return {"judge_model": "module-model"}

        def test_module_model():
            assert_context_relevance(GOOD) >= 0.5

        class TestClass:
            @pytest.fixture
            def ragmetrics_config(self):
                return {"judge_model": "class-model"}

            def test_class_model(self):
                assert_context_relevance(GOOD) >= 0.5
        """,
        test_plain="""
        import pytest
        from pytest_ragmetrics import assert_context_relevance
        from samples import GOOD

        def test_run_model():
            assert_context_relevance(GOOD) >= 0.5

        @pytest.mark.parametrize("ragmetrics_config", [{"judge_model": "parameter-model"}])
        def test_parameter_model(ragmetrics_config):
            assert_context_relevance(GOOD) >= 0.5
        """,
    )
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=4)
    seen = {r.body["model"] for r in judge_server.requests}
    assert seen == {"module-model", "class-model", "gpt-4o-mini", "parameter-model"}


def test_marker_arguments_are_validated(pytester):
    pytester.makepyfile("""
        import pytest
        @pytest.mark.ragmetrics(judge_modle="x")
        def test_typo():
            pass
    """)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_typo: unknown @pytest.mark.ragmetrics argument(s) judge_modle*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    # The allowed names are those a marker takes: no run-wide setting (reports, gates) among them.
    allowed = result.stderr.str().split("or a setting name:")[1]
    assert "judge_model" in allowed
    for run_wide in ("gates", "report", "report_json", "report_md", "report_html", "github_summary"):
        assert run_wide not in allowed.replace(",", " ").split()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "*samples='missing.jsonl'): no such file: *missing.jsonl"),
        ("", "*samples='missing.jsonl'): missing.jsonl: no samples*"),
        (
            '{"question": "q", "contexts": ["a \\ud800"]}\n',
            "*line 1: RagSample.contexts[[]0[]] contains a lone*",
        ),
    ],
    ids=["missing", "empty", "surrogate"],
)
def test_a_bad_samples_file_in_the_marker_is_a_usage_error(pytester, content, message):
    """It used to exit 2 with a chained "During handling of the above exception" traceback."""
    if content is not None:
        (pytester.path / "missing.jsonl").write_text(content)
    pytester.makepyfile("""
        import pytest
        @pytest.mark.ragmetrics(samples="missing.jsonl")
        def test_golden(rag_sample):
            pass
    """)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    text = result.stderr.str() + result.stdout.str()
    assert "Traceback" not in text and "During handling" not in text


def test_marker_refuses_run_wide_settings(pytester):
    pytester.makepyfile("""
        import pytest
        @pytest.mark.ragmetrics(report_json="x.json")
        def test_report_per_test():
            pass
    """)
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*report_json applies to the whole run*"])


def test_a_golden_set_marker_on_a_module_or_a_class_parametrizes_each_of_its_tests(pytester):
    (pytester.path / "golden.jsonl").write_text(
        '{"id": "g1", "question": "q1", "contexts": ["a"]}\n{"id": "g2", "question": "q2", "contexts": ["b"]}\n'
    )
    pytester.makepyfile(
        test_module="""
        import pytest
        pytestmark = pytest.mark.ragmetrics(samples="golden.jsonl")

        def test_each(rag_sample):
            pass
        """,
        test_class="""
        import pytest

        @pytest.mark.ragmetrics(samples="golden.jsonl")
        class TestGolden:
            def test_each(self, rag_sample):
                pass

        def test_plain():
            pass
        """,
    )
    result = pytester.runpytest("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    assert sorted(line for line in result.stdout.lines if "::" in line) == [
        "test_class.py::TestGolden::test_each[g1]",
        "test_class.py::TestGolden::test_each[g2]",
        "test_class.py::test_plain",
        "test_module.py::test_each[g1]",
        "test_module.py::test_each[g2]",
    ]


def test_a_marker_a_hook_puts_on_a_module_after_collection_is_checked_as_one_written_there(pytester):
    pytester.makeconftest("""
        import pytest

        def pytest_collection_modifyitems(items):
            for item in items:
                item.parent.add_marker(pytest.mark.ragmetrics(judge_modle="x"))
    """)
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_plain: unknown @pytest.mark.ragmetrics argument(s) judge_modle*"])


def test_marker_samples_parametrize_rag_sample(project):
    (project.path / "golden.jsonl").write_text(
        '{"id": "g1", "question": "Where is France?", "contexts": ["France is in Western Europe."], '
        '"ground_truth": "France is in Western Europe."}\n'
        '{"id": "g2", "question": "Capital?", "contexts": ["Paris is the capital."], '
        '"ground_truth": "Paris is the capital."}\n'
    )
    project.makepyfile(
        test_rag="""
        import pytest
        from pytest_ragmetrics import assert_context_recall

        @pytest.mark.ragmetrics(samples="golden.jsonl")
        def test_recall(rag_sample):
            assert_context_recall(rag_sample) >= 1.0

        def test_without_the_marker(rag_sample):
            pass
    """
    )
    result = project.runpytest("-v", "--setup-show")
    result.assert_outcomes(passed=2, errors=1)
    # The samples take the fixture's place: pytest sets up nothing else for them (no `request`).
    result.stdout.fnmatch_lines(
        [
            "*test_recall[[]g1[]] (fixtures used: rag_sample) PASSED*",
            "*test_recall[[]g2[]] (fixtures used: rag_sample) PASSED*",
        ]
    )
    result.stdout.fnmatch_lines(["*rag_sample needs @pytest.mark.ragmetrics(samples=*"])


def test_a_golden_set_is_parsed_once_per_run_and_again_once_edited(project, monkeypatch):
    """Every test function marked with the same file parsed it again; a file edited during the run
    (here, by the module collected after the first) is read as it is now."""
    import pytest_ragmetrics.loaders as loaders

    line = '{{"id": "g{0}", "question": "Q{0}?", "contexts": ["C{0}."], "ground_truth": "C{0}."}}\n'
    (project.path / "golden.jsonl").write_text(line.format(1) + line.format(2))
    marked = """
        import pytest

        @pytest.mark.ragmetrics(samples="golden.jsonl")
        def test_{0}(rag_sample):
            pass
    """
    project.makepyfile(
        test_a="\n".join(textwrap.dedent(marked.format(name)) for name in ("one", "two", "three")),
        test_b=f"import pathlib\npathlib.Path('golden.jsonl').open('a').write({line.format(3)!r})\n"
        + textwrap.dedent(marked.format("four")),
    )
    parsed = []
    real = loaders.load_samples

    def counted(path):
        parsed.append(path)
        return real(path)

    monkeypatch.setattr(loaders, "load_samples", counted)
    result = project.runpytest("--co", "-q")
    result.stdout.fnmatch_lines(["test_a.py::test_three[[]g2[]]", "test_b.py::test_four[[]g3[]]"])
    assert "9 tests collected" in result.stdout.str()
    assert len(parsed) == 2  # once for test_a's three functions, once after test_b edited the file


def test_replay_miss_fails_the_test_and_says_how_to_record(project, judge_server):
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_recall
        from samples import GOOD

        def test_recall():
            assert_context_recall(GOOD) >= 0.8
    """
    )
    result = project.runpytest("--rag-cache=replay")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*JudgmentNotRecorded*context_recall of sample 'good'*"])
    assert "--rag-cache=readwrite" in result.stdout.str()  # pytest's words, from the judging thread too
    assert judge_server.request_count == 0
    # The message is the whole story: no frames from the judging thread, the engine or asyncio.
    out = result.stdout.str()
    assert "judge/cache.py" not in out and "concurrent/futures" not in out
    assert "engine.py" not in out and "judging_loop.py" not in out


def test_a_missing_key_is_explained_once_and_counted(project, judge_server, monkeypatch):
    """Without a key, every test fails for the same reason: the advice is printed in full once, not
    once per test, and the end of the run counts the tests that failed for it."""
    monkeypatch.delenv("OPENAI_API_KEY")
    project.makepyfile(
        test_rag="""
        import pytest
        from pytest_ragmetrics import assert_context_recall
        from samples import GOOD

        @pytest.mark.parametrize("i", range(5))
        def test_recall(i):
            assert_context_recall(GOOD) >= 0.8
    """
    )
    result = project.runpytest("-p", "no:randomly")
    result.assert_outcomes(failed=5)
    # The failures section; pytest's short summary repeats each message (in full when CI is set).
    failures = result.stdout.str().split("short test summary info")[0]
    assert failures.count("to use another OpenAI-compatible server") == 1, failures
    result.stdout.fnmatch_lines(["ragmetrics: 4 tests failed with the same error: no API key for the LLM judge*"])


def test_no_api_key_is_a_clear_error(project, judge_server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY")
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_recall
        from samples import GOOD

        def test_recall():
            assert_context_recall(GOOD) >= 0.8
    """
    )
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*OPENAI_API_KEY*"])
    assert judge_server.request_count == 0


def _rag_tests(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_rag="""
        import pytest
        from pytest_ragmetrics import assert_context_precision, assert_context_recall, assert_context_relevance
        from samples import GOOD, PARTIAL

        @pytest.mark.parametrize("sample", [GOOD, PARTIAL], ids=["good", "partial"])
        def test_recall(sample):
            assert_context_recall(sample) >= 0.5

        @pytest.mark.parametrize("sample", [GOOD, PARTIAL], ids=["good", "partial"])
        def test_precision(sample):
            assert_context_precision(sample) >= 0.5

        def test_relevance():
            assert_context_relevance([GOOD, PARTIAL], method="sentence") >= 0.4
    """
    )


def test_json_report_is_stable_between_runs(project):
    """Once judged, every run of the same judgments writes the same bytes."""
    _rag_tests(project)
    project.runpytest("--rag-report-json=out/cold.json").assert_outcomes(passed=5)
    project.runpytest("--rag-report-json=out/a.json").assert_outcomes(passed=5)
    project.runpytest("--rag-report-json=out/b.json").assert_outcomes(passed=5)
    a = (project.path / "out" / "a.json").read_text()
    assert a == (project.path / "out" / "b.json").read_text()
    report = json.loads(a)
    assert report["version"] == 1
    rows = report["results"]
    assert [r["nodeid"] for r in rows] == sorted(r["nodeid"] for r in rows)
    partial = next(r for r in rows if r["nodeid"].endswith("test_recall[partial]"))
    assert partial["score"] == 0.5 and partial["op"] == ">=" and partial["threshold"] == 0.5
    assert partial["samples"][0]["verdicts"][1]["reason"] == "no context says so"
    metrics = {(m["metric"], m["method"]): m for m in report["summary"]["metrics"]}
    assert metrics[("context_recall", None)]["n"] == 2
    assert metrics[("context_recall", None)]["mean"] == 0.75


def test_markdown_report_and_github_step_summary(project, monkeypatch):
    _rag_tests(project)
    summary = project.path / "step_summary.md"
    summary.write_text("# earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    project.runpytest("--rag-report-md=report.md", "--rag-github-summary").assert_outcomes(passed=5)
    markdown = (project.path / "report.md").read_text()
    assert "context\\_recall" in markdown
    text = summary.read_text()
    assert text.startswith("# earlier step\n") and markdown.strip() in text


def test_html_report_is_written_and_escapes_contexts(project):
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import RagSample, assert_context_relevance

        def test_markup():
            s = RagSample("Where is Paris?", ["<script>alert('x')</script> Paris is in France."], id="xss")
            assert_context_relevance(s) >= 0.5
    """
    )
    project.runpytest("--rag-report-html=report.html").assert_outcomes(passed=1)
    html = (project.path / "report.html").read_text()
    assert "&lt;script&gt;alert(" in html and "<script>alert(" not in html


def test_junitxml_carries_scores_thresholds_and_outcomes(project):
    _rag_tests(project)
    project.runpytest("--junitxml=junit.xml").assert_outcomes(passed=5)
    xml = (project.path / "junit.xml").read_text()
    assert '<property name="ragmetrics.1.context_recall.score" value="0.5" />' in xml
    assert '<property name="ragmetrics.1.context_recall.threshold" value="&gt;= 0.5" />' in xml
    assert '<property name="ragmetrics.1.context_recall.passed" value="true" />' in xml


def test_a_comparison_is_junit_properties_of_its_test_only_with_junitxml(project):
    """Without --junitxml nothing reads a comparison's JUnit properties: a test keeps none, and
    its reports (which pytest keeps to the end of the run) carry none."""
    _rag_tests(project)
    project.makeconftest(
        """
        import json

        def pytest_runtest_logreport(report):
            if report.when == "call":
                with open("properties.jsonl", "a") as fh:
                    fh.write(json.dumps([report.nodeid, report.user_properties]) + "\\n")
        """
    )
    project.runpytest().assert_outcomes(passed=5)
    lines = [json.loads(line) for line in (project.path / "properties.jsonl").read_text().splitlines()]
    assert len(lines) == 5 and all(properties == [] for _, properties in lines)
    (project.path / "properties.jsonl").unlink()
    project.runpytest("--junitxml=junit.xml").assert_outcomes(passed=5)
    lines = [json.loads(line) for line in (project.path / "properties.jsonl").read_text().splitlines()]
    recall = dict(next(properties for nodeid, properties in lines if nodeid.endswith("test_recall[good]")))
    assert recall["ragmetrics.1.context_recall.score"] == "1"
    assert recall["ragmetrics.1.context_recall.passed"] == "true"


def test_a_comparisons_junit_properties_write_its_score_threshold_and_outcome_as_given():
    """The properties a comparison shares with the same comparison of other tests are made once,
    and still written as each comparison gives them: a threshold of -0.0 is not the one of 0.0."""
    from pytest_ragmetrics.report.junit import comparison_properties

    row = {"metric": "context_recall", "method": None, "stat": "score", "score": 0.5, "op": ">=",
           "threshold": 0.0, "passed": True}
    name = "ragmetrics.1.context_recall"
    assert comparison_properties(1, row) == [
        (f"{name}.score", "0.5"), (f"{name}.threshold", ">= 0"), (f"{name}.passed", "true")
    ]
    assert comparison_properties(1, {**row, "score": 0.25, "threshold": -0.0, "passed": False}) == [
        (f"{name}.score", "0.25"), (f"{name}.threshold", ">= -0"), (f"{name}.passed", "false")
    ]
    assert comparison_properties(1, row)[1] == (f"{name}.threshold", ">= 0")
    unscored = {**row, "method": "claims", "stat": "mean", "score": None, "no_claims": 2, "op": "<"}
    assert comparison_properties(2, unscored) == [
        ("ragmetrics.2.context_recall[claims].mean", "no score"),
        ("ragmetrics.2.context_recall[claims].threshold", "< 0"),
        ("ragmetrics.2.context_recall[claims].passed", "true"),
    ]


def test_sentence_relevance_failure_quotes_the_sentences_the_judge_picked(project):
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import RagSample, assert_context_relevance

        def test_sentences():
            sample = RagSample("Where is France?", ["France is in Western Europe. The cuisine is famous."], id="s")
            assert_context_relevance(sample, method="sentence") >= 0.9
    """
    )
    result = project.runpytest("--rag-report")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*context_relevance[[]sentence[]] of sample 's' = 0.500, expected >= 0.9",
            "*- chunk 1 [[]1/2 sentences needed[]] 'France is in Western Europe. The cuisine is famous.'",
            "*judge: keyword sentences",
            "*picked: 'France is in Western Europe.'",
        ]
    )
    # The report's failing row quotes the pick too.
    result.stdout.fnmatch_lines(
        ["FAIL*context_relevance[[]sentence[]]*", "*", "      chunk 1 picked 'France is in Western Europe.'"]
    )


def test_tests_stopped_by_a_ragmetrics_error_are_in_every_report(project):
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_recall
        from samples import GOOD

        def test_not_recorded():
            assert_context_recall(GOOD) >= 0.5

        def test_plain():
            pass
    """
    )
    result = project.runpytest(
        "--rag-cache=replay", "--rag-report", "--rag-report-json=r.json", "--rag-report-md=r.md",
        "--rag-report-html=r.html",
    )  # fmt: skip
    result.assert_outcomes(failed=1, passed=1)
    text = result.stdout.str()
    assert "no failing comparisons" not in text and "no ragmetrics comparisons recorded" not in text
    result.stdout.fnmatch_lines(
        [
            "*ragmetrics report*",
            "*- errors -*",
            "ERROR  test_rag.py::test_not_recorded: JudgmentNotRecorded: no recorded judgment for*",
        ]
    )
    (error,) = json.loads((project.path / "r.json").read_text())["summary"]["errors"]
    assert error["nodeid"] == "test_rag.py::test_not_recorded" and error["error"] == "JudgmentNotRecorded"
    assert error["when"] == "call" and error["message"].startswith("no recorded judgment for")
    markdown = (project.path / "r.md").read_text()
    assert "1 test stopped by an error" in markdown.splitlines()[0]
    assert "- test\\_rag.py::test\\_not\\_recorded: JudgmentNotRecorded: no recorded judgment" in markdown
    html = (project.path / "r.html").read_text()
    assert '<section id="errors">' in html and "1 test stopped by an error" in html


def test_report_header_names_judge_and_cache(project):
    project.makepyfile("def test_x():\n    pass\n")
    result = project.runpytest("--rag-report", "--rag-judge-model=judge-x")
    result.stdout.fnmatch_lines(["ragmetrics: judge judge-x, cache readwrite*"])


def test_quiet_report_shows_only_failing_rows(project):
    _rag_tests(project)
    project.makepyfile(
        test_fail="""
        from pytest_ragmetrics import assert_context_recall
        from samples import PARTIAL

        def test_fails():
            assert_context_recall(PARTIAL) >= 0.9
    """
    )
    result = project.runpytest("--rag-report", "-q")
    out = result.stdout.str()
    assert "test_fails" in out.split("ragmetrics report")[1]
    assert "test_recall[good]" not in out.split("ragmetrics report")[1]


@pytest.mark.parametrize("extra", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_gates_and_report_merge_across_workers(project, extra):
    _rag_tests(project)
    result = project.runpytest(
        "--rag-report",
        "--rag-report-json=report.json",
        "--rag-gate",
        "context_recall mean >= 0.7",
        "--rag-gate",
        "context_precision min >= 0.6",
        "-p",
        "xdist",
        *extra,
    )
    result.assert_outcomes(passed=5)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the precision gate fails: partial scores 0.5
    report = json.loads((project.path / "report.json").read_text())
    assert len(report["results"]) == 5
    gates = {g["spec"]: g for g in report["summary"]["gates"]}
    assert gates["context_recall mean >= 0.7"]["passed"] and gates["context_recall mean >= 0.7"]["n"] == 2
    assert not gates["context_precision min >= 0.6"]["passed"]
    assert report["summary"]["judge"]["calls"] > 0
    result.stdout.fnmatch_lines(["*ragmetrics report*", "*FAIL*context_precision min >= 0.6*"])


def test_judging_in_a_fixture_follows_the_run_configuration(project, judge_server):
    """Outside the test body (a session fixture) the run's settings apply, not just the environment."""
    project.makeini("[pytest]\nrag_cache = replay\n")
    project.makepyfile(
        test_rag="""
        import pytest
        from pytest_ragmetrics import JudgmentNotRecorded, evaluate
        from samples import GOOD

        @pytest.fixture(scope="session")
        def scores():
            with pytest.raises(JudgmentNotRecorded):
                evaluate([GOOD], ["context_recall"])
            return "replayed"

        def test_uses_fixture(scores):
            assert scores == "replayed"
    """
    )
    project.runpytest().assert_outcomes(passed=1)
    assert judge_server.request_count == 0


def test_samples_without_ids_in_different_tests_are_not_merged(project):
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import RagSample, assert_context_recall

        def make(q):
            return RagSample(q, ["France is in Western Europe."], ground_truth="France is in Western Europe.")

        def test_a():
            assert_context_recall([make("Where is France?"), make("Which continent?")]) >= 0.5

        def test_b():
            assert_context_recall([make("Where is it?"), make("Which region?")]) >= 0.5
    """
    )
    project.runpytest("--rag-report-json=r.json").assert_outcomes(passed=2)
    metrics = json.loads((project.path / "r.json").read_text())["summary"]["metrics"]
    assert metrics == [
        {"metric": "context_recall", "method": None, "n": 4, "mean": 1.0, "min": 1.0, "max": 1.0}
    ]


def test_unused_result_warning_never_hides_the_real_failure(project):
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_recall
        from samples import GOOD

        def test_crashes():
            check = assert_context_recall(GOOD)
            raise ValueError("retriever crashed")
    """
    )
    result = project.runpytest("-W", "error::pytest_ragmetrics.RagMetricsWarning")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["FAILED test_rag.py::test_crashes - ValueError: retriever crashed"])
    assert "RagMetricsWarning" not in result.stdout.str()


def test_report_names_the_judge_models_actually_used(project):
    project.makeconftest("""
        import pytest
        @pytest.fixture
        def ragmetrics_config():
            return {"judge_model": "judge-from-fixture"}
    """)
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_recall
        from samples import GOOD

        def test_recall():
            assert_context_recall(GOOD) >= 0.5
    """
    )
    project.runpytest("--rag-report-json=r.json").assert_outcomes(passed=1)
    report = json.loads((project.path / "r.json").read_text())
    assert report["summary"]["judge"]["model"] == "judge-from-fixture"
    assert report["results"][0]["judges"] == ["judge-from-fixture"]


def test_report_paths_are_relative_to_the_rootdir(project):
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_recall
        from samples import GOOD

        def test_recall():
            assert_context_recall(GOOD) >= 0.5
    """
    )
    project.runpytest("--rag-report-json=r.json", "--rag-store-dir=judgments").assert_outcomes(passed=1)
    report = json.loads((project.path / "r.json").read_text())
    assert report["results"][0]["where"] == ["test_rag.py", 5]
    assert report["summary"]["judge"]["cache_dir"] == ".pytest_cache/d/ragmetrics"
    assert report["summary"]["judge"]["store_dir"] == "judgments"


def test_gates_over_metrics_a_partial_run_never_scored_are_skipped(project):
    project.makeini(
        "[pytest]\nrag_gates =\n    context_recall mean >= 0.9\n    context_precision mean >= 0.5\n"
    )
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_recall
        from samples import GOOD

        def test_recall():
            assert_context_recall(GOOD) >= 0.5

        def test_plain():
            pass
    """
    )
    full = project.runpytest("--rag-report")
    assert full.ret == pytest.ExitCode.TESTS_FAILED  # precision was never scored: a full run fails the gate
    full.stdout.fnmatch_lines(["FAIL*context_precision mean >= 0.5*context_precision not measured*"])
    partial = project.runpytest("--rag-report", "-k", "recall")
    assert partial.ret == pytest.ExitCode.OK
    partial.stdout.fnmatch_lines(["SKIP*context_precision mean >= 0.5*not evaluated*partial run*"])
    named = project.runpytest("--rag-report", "test_rag.py::test_plain")
    assert named.ret == pytest.ExitCode.OK
    # Listing the fixtures runs no test: no gate is said to have failed.
    listed = project.runpytest("--fixtures")
    assert listed.ret == pytest.ExitCode.OK
    assert "gate failed" not in listed.stdout.str()


def test_a_failing_run_does_not_teach_prune_which_judgments_are_unused(project):
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_precision, assert_context_recall
        from samples import GOOD

        def test_two_metrics():
            assert_context_precision(GOOD) >= THRESHOLD
            assert_context_recall(GOOD) >= 0.5
    """.replace("THRESHOLD", "0.5")
    )
    project.runpytest("--rag-store-dir=judgments").assert_outcomes(passed=1)
    record = project.path / ".pytest_cache" / "d" / "ragmetrics" / "last_run.json"
    assert json.loads(record.read_text())["unused"] == []  # 2 precision chunks + 1 recall, all used
    (project.path / "test_rag.py").write_text(
        (project.path / "test_rag.py").read_text().replace(">= 0.5\n", ">= 1.5\n", 1)
    )
    project.runpytest("--rag-store-dir=judgments").assert_outcomes(failed=1)
    assert json.loads(record.read_text()) == {"reason": "tests failed or errored", "finished_at": ANY}


def test_under_xdist_failures_warnings_and_junit_properties_reach_the_controller(project):
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_precision, assert_context_recall
        from samples import GOOD, PARTIAL

        def test_passes():
            assert_context_recall(GOOD) >= 0.8

        def test_fails():
            assert_context_recall(PARTIAL) >= 0.8

        def test_forgets():
            assert_context_precision(GOOD)
    """
    )
    result = project.runpytest("-n", "2", "-p", "xdist", "--junitxml=junit.xml", "-W", "always")
    result.assert_outcomes(passed=2, failed=1, warnings=1)
    result.stdout.fnmatch_lines(["*context_recall of sample 'partial' = 0.500, expected >= 0.8"])
    result.stdout.fnmatch_lines(
        ["*test_rag.py:11*RagMetricsWarning: context_precision result was never compared*"]
    )
    xml = (project.path / "junit.xml").read_text()
    assert '<property name="ragmetrics.1.context_recall.passed" value="false" />' in xml
    assert '<property name="ragmetrics.1.context_recall.score" value="1" />' in xml


def test_azure_provider_without_endpoint_or_version_says_what_to_set(project, judge_server, monkeypatch):
    for name in ("AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION", "RAGMETRICS_JUDGE_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_recall
        from samples import GOOD

        def test_recall():
            assert_context_recall(GOOD) >= 0.8
    """
    )
    result = project.runpytest("--rag-judge-provider=azure")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # at startup, not one failure per test
    result.stderr.fnmatch_lines(
        [
            "*ragmetrics: the Azure OpenAI judge needs the endpoint (--rag-judge-base-url=*AZURE_OPENAI_ENDPOINT*"
        ]
    )
    assert "Settings(" not in result.stderr.str()
    assert "Traceback" not in result.stderr.str()
    assert judge_server.request_count == 0
    # Replay needs no judge at all: the same settings are fine there.
    replay = project.runpytest("--rag-judge-provider=azure", "--rag-cache=replay")
    replay.assert_outcomes(failed=1)
    replay.stdout.fnmatch_lines(["*JudgmentNotRecorded*"])


def test_a_base_url_without_its_scheme_is_a_usage_error_naming_the_address_to_set(
    project, judge_server, monkeypatch
):
    """``localhost:11434/v1`` failed every judgment after its retries, as a connection error."""
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_recall
        from samples import GOOD

        def test_recall():
            assert_context_recall(GOOD) >= 0.8
    """
    )
    bare = judge_server.base_url.removeprefix("http://")
    result = project.runpytest(f"--rag-judge-base-url={bare}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # at startup, not one failure per test
    said = f"the judge's base URL '{bare}' does not start with http:// or https://"
    result.stderr.fnmatch_lines([f"*ragmetrics: {said}: set --rag-judge-base-url=http://{bare} *"])
    assert judge_server.request_count == 0
    # The SDK's own variable is the OpenAI judge's to read: a run whose judge a plugin makes never uses it.
    monkeypatch.setenv("OPENAI_BASE_URL", bare)
    monkeypatch.delenv("RAGMETRICS_JUDGE_BASE_URL", raising=False)
    project.makeconftest(
        """
        from pytest_ragmetrics import ScriptedJudge
        from pytest_ragmetrics.testing import conforming_value

        def pytest_ragmetrics_make_judge(settings):
            return ScriptedJudge(lambda request: conforming_value(request.schema), model=settings.judge_model)
    """
    )
    project.runpytest("--rag-cache=off").assert_outcomes(passed=1)


FOUR_TESTS = """
    from pytest_ragmetrics import RagSample, assert_context_precision
    from samples import GOOD, PARTIAL

    OTHER = RagSample("What is the capital of France?", ["Paris is the capital of France."],
                      ground_truth="Paris.", id="other")
    LAST = RagSample("Which continent is France in?", ["France is in Western Europe."],
                     ground_truth="Europe.", id="last")

    def test_one():
        assert_context_precision(GOOD) >= 0.5

    def test_two():
        assert_context_precision(PARTIAL) >= 0.5

    def test_three():
        assert_context_precision(OTHER) >= 0.5

    def test_four():
        assert_context_precision(LAST) >= 0.5
"""


def _prune(project: pytest.Pytester, *extra: str) -> int:
    from pytest_ragmetrics.__main__ import main

    cache = project.path / ".pytest_cache" / "d" / "ragmetrics"
    return main(
        ["cache", "prune", "--cache-dir", str(cache), "--store-dir", str(project.path / "judgments"), *extra]
    )


def _pruned(project: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> str:
    """What ``cache prune --yes`` printed; it succeeded."""
    capsys.readouterr()
    assert _prune(project, "--yes") == 0
    return capsys.readouterr().out


PARTIAL_RUNS = [
    ["test_rag.py::test_one"],
    ["test_rag.py"],
    ["-k", "one"],
    ["-m", "not slow"],
    ["--deselect", "test_rag.py::test_two"],
    ["--lf"],
    ["-n", "2", "-p", "xdist", "-k", "one"],
    ["--ignore", "test_more.py"],
    ["--ignore-glob", "*_more.py"],
]

#: A test of its own file, judging what no test of FOUR_TESTS judges.
MORE_TESTS = """
    from pytest_ragmetrics import RagSample, assert_context_precision

    def test_more():
        more = RagSample("Where is Paris?", ["Paris is in Europe."], ground_truth="In Europe.", id="more")
        assert_context_precision(more) >= 0.5
"""


def test_prune_learns_nothing_from_a_partial_run(project, capsys):
    """Runs of part of the suite must not make `cache prune` delete what the rest of it needs."""
    project.makepyfile(test_rag=FOUR_TESTS, test_more=MORE_TESTS)
    project.runpytest("--rag-store-dir=judgments").assert_outcomes(passed=5)
    store = pytest_ragmetrics.judge.store.JudgmentStore(project.path / "judgments")
    before = store.keys()
    assert len(before) == 6  # test_one and test_two share a chunk
    record = project.path / ".pytest_cache" / "d" / "ragmetrics" / "last_run.json"
    for partial in PARTIAL_RUNS:
        record.unlink(missing_ok=True)
        result = project.runpytest("--rag-store-dir=judgments", "--rag-report", *partial)
        assert result.ret == pytest.ExitCode.OK, partial
        assert "unused judgment store entries" not in result.stdout.str(), partial
        assert "unused" not in json.loads(record.read_text()), partial
    project.runpytest("--rag-store-dir=judgments").assert_outcomes(passed=5)
    assert _prune(project, "--yes") == 0
    assert "nothing to prune" in capsys.readouterr().out
    assert store.keys() == before
    replay = project.runpytest("--rag-store-dir=judgments", "--rag-cache=replay", "--rag-cache-dir=empty")
    replay.assert_outcomes(passed=5)


def test_unused_line_follows_complete_runs_only_with_the_number_prune_deletes(project, capsys):
    project.makepyfile(test_rag=FOUR_TESTS)
    project.runpytest("--rag-store-dir=judgments").assert_outcomes(passed=4)
    # The suite drops a test: its two judgments are no longer needed.
    (project.path / "test_rag.py").write_text(
        (project.path / "test_rag.py").read_text().replace("def test_two", "def _test_two")
    )
    partial = project.runpytest("--rag-store-dir=judgments", "--rag-report", "test_rag.py")
    partial.assert_outcomes(passed=3)
    assert "unused judgment store entries" not in partial.stdout.str()
    stopped = project.runpytest("--rag-store-dir=judgments", "--rag-report", "-x", "-k", "not three")
    assert "unused judgment store entries" not in stopped.stdout.str()
    full = project.runpytest("--rag-store-dir=judgments", "--rag-report")
    full.assert_outcomes(passed=3)
    full.stdout.fnmatch_lines(["*1 unused judgment store entries; remove them with: *prune*"])
    assert _prune(project, "--yes") == 0
    assert "deleted 1 of 5 store entries" in capsys.readouterr().out
    project.runpytest(
        "--rag-store-dir=judgments", "--rag-cache=replay", "--rag-cache-dir=empty"
    ).assert_outcomes(passed=3)


def test_an_ignore_of_the_ini_s_addopts_defines_the_suite_and_one_given_for_the_run_leaves_part_out(
    project, capsys
):
    """``addopts = --ignore=drafts`` made every run partial, so `cache prune` never learnt what was unused."""
    project.makeini("[pytest]\naddopts = --ignore=drafts --ignore-glob=*_draft.py\n")
    project.makepyfile(test_rag=FOUR_TESTS, test_more_draft=MORE_TESTS)
    project.path.joinpath("drafts").mkdir()
    project.path.joinpath("drafts", "test_more.py").write_text(textwrap.dedent(MORE_TESTS))
    project.runpytest("--rag-store-dir=judgments").assert_outcomes(passed=4)
    # The suite drops a test: its judgment is no longer needed.
    (project.path / "test_rag.py").write_text(
        (project.path / "test_rag.py").read_text().replace("def test_two", "def _test_two")
    )
    for partial in (["--ignore=test_other.py"], ["--ignore-glob=*_other.py"], ["--ignore=drafts"]):
        result = project.runpytest("--rag-store-dir=judgments", "--rag-report", *partial)
        result.assert_outcomes(passed=3)
        assert "unused judgment store entries" not in result.stdout.str(), partial
    full = project.runpytest("--rag-store-dir=judgments", "--rag-report")
    full.assert_outcomes(passed=3)
    full.stdout.fnmatch_lines(["*1 unused judgment store entries; remove them with: *prune*"])
    assert "deleted 1 of 5 store entries" in _pruned(project, capsys)


def test_a_default_run_under_the_ini_s_marker_selection_prunes_nothing_the_nightly_job_needs(project):
    """``addopts = -m "not slow"`` by day, ``pytest -m slow`` at night: the day's run leaves the slow
    tests out, so it must not teach `cache prune` that their judgments are unused."""
    project.makeini('[pytest]\naddopts = -m "not slow"\nmarkers =\n    slow: nightly\n')
    slow = MORE_TESTS.replace("    def test_more", "    import pytest\n\n    @pytest.mark.slow\n    def test_more")
    project.makepyfile(test_rag=FOUR_TESTS, test_slow=slow)
    project.runpytest("--rag-store-dir=judgments", "-m", "slow").assert_outcomes(passed=1)
    project.runpytest("--rag-store-dir=judgments").assert_outcomes(passed=4)
    _prune(project, "--yes")  # refused or not, it must leave the slow test's judgment
    replay = project.runpytest("--rag-store-dir=judgments", "-m", "slow", "--rag-cache=replay", "--rag-cache-dir=empty")
    replay.assert_outcomes(passed=1)


ONE_SKIPPED = FOUR_TESTS.replace(
    "def test_three", "@pytest.mark.skipif(True, reason='not today')\n    def test_three"
).replace("from samples", "import pytest\n    from samples")


def test_prune_keeps_everything_a_skipped_test_of_unknown_samples_may_need(project, capsys):
    """A complete, passing run with skipped tests never used their judgments: prune must keep them."""
    project.makepyfile(test_rag=FOUR_TESTS)
    project.runpytest("--rag-store-dir=judgments").assert_outcomes(passed=4)
    store = pytest_ragmetrics.judge.store.JudgmentStore(project.path / "judgments")
    before = store.keys()
    project.makepyfile(test_rag=ONE_SKIPPED)
    skipping = project.runpytest("--rag-store-dir=judgments", "--rag-report")
    assert skipping.ret == pytest.ExitCode.OK
    assert "unused judgment store entries" not in skipping.stdout.str()
    kept = "1 skipped test with samples the run does not know (test_rag.py::test_three)"
    assert f"kept 1 store entry the last full run did not use: {kept}\nnothing to prune" in _pruned(project, capsys)
    assert store.keys() == before
    project.makepyfile(test_rag=FOUR_TESTS)
    replay = project.runpytest("--rag-store-dir=judgments", "--rag-cache=replay", "--rag-cache-dir=empty")
    replay.assert_outcomes(passed=4)


def test_a_partial_run_after_a_full_one_stops_prune_from_using_the_older_record(project, capsys):
    """Judgments a partial run records after a full run are not in that run's record: keep them."""
    project.makepyfile(test_rag=FOUR_TESTS.replace("def test_four", "def _test_four"))
    project.runpytest("--rag-store-dir=judgments").assert_outcomes(passed=3)
    project.makepyfile(test_rag=FOUR_TESTS)
    project.runpytest("--rag-store-dir=judgments", "-k", "four").assert_outcomes(passed=1)
    store = pytest_ragmetrics.judge.store.JudgmentStore(project.path / "judgments")
    before = store.keys()
    assert _prune(project, "--yes") == 1
    assert "tests were deselected" in capsys.readouterr().err
    assert store.keys() == before


@pytest.mark.parametrize("extra", [["--rag-cache=off"], ["-n", "2", "-p", "xdist", "--rag-cache=off"]])
def test_the_unused_hint_and_prune_give_the_same_count_without_a_cache(project, capsys, extra):
    project.makepyfile(test_rag=FOUR_TESTS)
    project.runpytest("--rag-store-dir=judgments").assert_outcomes(passed=4)
    (project.path / "test_rag.py").write_text(
        (project.path / "test_rag.py").read_text().replace("def test_two", "def _test_two")
    )
    full = project.runpytest("--rag-store-dir=judgments", "--rag-report", *extra)
    full.assert_outcomes(passed=3)
    full.stdout.fnmatch_lines(["*1 unused judgment store entries; remove them with: *prune*"])
    assert _prune(project, "--dry-run") == 0
    assert "would delete 1 of 5 store entries" in capsys.readouterr().out


def test_no_credential_reaches_the_output_or_the_reports(project, judge_server, monkeypatch):
    secret = "hunter2-0123456789"
    monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", judge_server.base_url.replace("//", f"//user:{secret}@"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-abcdefghijklmnop")
    judge_server.fail_next(403, body={"error": {"message": "denied for Bearer sk-live-abcdefghijklmnop"}})
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_recall
        from samples import GOOD

        def test_recall():
            assert_context_recall(GOOD) >= 0.5
    """
    )
    result = project.runpytest("--rag-report", "--rag-report-json=r.json", "--rag-report-md=r.md")
    result.assert_outcomes(failed=1)
    text = result.stdout.str() + result.stderr.str()
    assert "HTTP 403" in text
    for path in ("r.json", "r.md"):
        text += (project.path / path).read_text()
    assert secret not in text
    assert "abcdefghijklmnop" not in text


def test_after_the_judge_refuses_the_key_the_other_tests_fail_at_once(project, judge_server):
    judge_server.fail_next(401, times=50)
    project.makepyfile(test_rag=FOUR_TESTS)
    result = project.runpytest("--rag-concurrency=1")  # one request in flight: the count is exact
    result.assert_outcomes(failed=4)
    assert judge_server.request_count == 1
    assert result.stdout.str().count("the API key was not accepted") >= 4
    result.stdout.fnmatch_lines(["*the remaining judgments of this run fail without asking*"])


@pytest.mark.parametrize("extra", [[], ["-n", "2", "-p", "xdist"]], ids=["serial", "xdist"])
def test_only_the_final_attempt_of_a_rerun_test_counts(project, extra):
    """pytest-rerunfailures: a discarded failed attempt must not count in aggregates and gates."""
    project.makepyfile(
        test_rag="""
        from pathlib import Path
        from pytest_ragmetrics import assert_context_recall
        from samples import GOOD, PARTIAL

        def test_flaky_retriever():
            marker = Path("attempted")
            first = not marker.exists()
            marker.write_text("1")
            assert_context_recall(PARTIAL if first else GOOD) >= 0.8
    """
    )
    result = project.runpytest(
        "-p",
        "rerunfailures",
        "--reruns=1",
        "--rag-gate=context_recall mean >= 0.8",
        "--rag-report",
        "--rag-report-json=r.json",
        *extra,
    )
    outcomes = result.parseoutcomes()
    assert (outcomes.get("passed"), outcomes.get("rerun")) == (1, 1)
    assert result.ret == pytest.ExitCode.OK
    report = json.loads((project.path / "r.json").read_text())
    assert [r["passed"] for r in report["results"]] == [True]
    assert report["summary"]["metrics"][0]["n"] == 1
    assert report["summary"]["gates"][0]["passed"] is True


def test_replay_after_recording_with_another_model_names_that_model(project):
    project.makepyfile(
        test_rag="""
        from pytest_ragmetrics import assert_context_recall
        from samples import GOOD

        def test_recall():
            assert_context_recall(GOOD) >= 0.5
    """
    )
    project.runpytest("--rag-store-dir=judgments", "--rag-judge-model=judge-x").assert_outcomes(passed=1)
    result = project.runpytest("--rag-store-dir=judgments", "--rag-cache=replay", "--rag-cache-dir=empty")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*The store holds this judgment recorded with model judge-x: set --rag-judge-model=judge-x*"]
    )


def test_several_judge_samples_at_temperature_zero_warn_at_startup(project):
    project.makepyfile(test_rag="def test_plain():\n    pass\n")
    result = project.runpytest(
        "--rag-judge-n=3", "-W", "always::pytest_ragmetrics.errors.RagMetricsWarning"
    )
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(
        ["*judge_n=3 at temperature 0 pays for 3 identical answers*--rag-temperature=0.7*"]
    )
    quiet = project.runpytest("--rag-judge-n=3", "--rag-temperature=0.7")
    quiet.assert_outcomes(passed=1)
    assert "identical answers" not in quiet.stdout.str()


def test_xdist_workers_record_into_one_store_that_replays_alone(project, judge_server):
    """Two workers append to the same shards at once: every judgment is recorded once, sorted."""
    rows = [
        {
            "id": f"s{i}",
            "question": f"Where is France and what is its capital? ({i})",
            "contexts": [f"France is in Western Europe ({i}).", f"Paris is the capital ({i})."],
            "ground_truth": "France is in Western Europe. Its capital is Paris.",
        }
        for i in range(24)
    ]
    (project.path / "golden.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    project.makepyfile(
        test_golden="""
        import pytest
        from pytest_ragmetrics import assert_context_precision, assert_context_recall

        @pytest.mark.ragmetrics(samples="golden.jsonl")
        def test_sample(rag_sample):
            assert_context_precision(rag_sample) >= 0.5
            assert_context_recall(rag_sample) >= 0.5
        """
    )
    project.runpytest("-n", "2", "-p", "xdist", "--rag-store-dir=judgments").assert_outcomes(passed=24)
    store = project.path / "judgments"
    assert (store / ".gitattributes").read_text().endswith("*.jsonl merge=union text eol=lf\n")
    keys = []
    for shard in sorted(store.glob("*.jsonl")):
        lines = [json.loads(line) for line in shard.read_text(encoding="utf-8").splitlines()]
        ids = [line.get("key", line.get("text")) for line in lines]
        assert ids == sorted(set(ids)), shard.name  # sorted, one line per judgment or shared text
        keys += [line["key"] for line in lines if "key" in line]
    assert len(keys) == judge_server.request_count == 24 * 3  # two chunks and one recall each

    calls = judge_server.request_count
    # The store alone (no local cache) replays the run: one process reads what two wrote.
    replay = project.runpytest("-p", "no:cacheprovider", "--rag-store-dir=judgments", "--rag-cache=replay")
    replay.assert_outcomes(passed=24)
    assert judge_server.request_count == calls


def test_gate_outcomes_are_junit_test_suite_properties(pytester):
    """Gates are known only at the end of the run: they reach --junitxml as test-suite properties."""
    import xml.etree.ElementTree as ET

    pytester.makepyfile(
        """
        from pytest_ragmetrics import RagSample, assert_metric

        S = RagSample("q", ["a", "b"], id="s1", context_ids=["d1", "d2"], reference_context_ids=["d1"])

        def test_one():
            assert_metric(S, "mrr") >= 0.5
        """
    )
    pytester.makeini("[pytest]\nrag_gates =\n    mrr mean >= 0.9\n    mrr min > 1\n")
    result = pytester.runpytest("--junitxml=junit.xml")
    result.assert_outcomes(passed=1)
    assert result.ret == 1  # the second gate fails
    suite = ET.parse(pytester.path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["ragmetrics.gate.1.spec"] == "mrr mean >= 0.9"
    assert properties["ragmetrics.gate.1.value"] == "1"
    assert properties["ragmetrics.gate.1.n"] == "1"
    assert properties["ragmetrics.gate.1.passed"] == "true"
    assert properties["ragmetrics.gate.2.spec"] == "mrr min > 1"
    assert properties["ragmetrics.gate.2.passed"] == "false"


GOLDEN_SKIPPING = """
    import os
    import pytest
    from pytest_ragmetrics import assert_context_precision

    @pytest.mark.ragmetrics(samples="golden.jsonl")
    def test_golden(rag_sample):
        if rag_sample.id in os.environ.get("SKIP_SAMPLES", "").split(","):
            pytest.skip("not today")
        assert_context_precision(rag_sample) >= 0.0
"""


def test_prune_after_skipped_golden_tests_keeps_what_their_samples_need_and_says_so(
    project, capsys, monkeypatch
):
    golden = [
        {"id": f"s{i}", "question": f"Limit of plan {i}?", "contexts": [f"Plan {i} has {i} GB."],
         "ground_truth": f"{i} GB."}
        for i in range(1, 4)
    ]  # fmt: skip
    path = project.path / "golden.jsonl"
    path.write_text("\n".join(map(json.dumps, golden)))
    project.makepyfile(test_golden=GOLDEN_SKIPPING)
    project.runpytest("--rag-store-dir=judgments").assert_outcomes(passed=3)
    store = pytest_ragmetrics.judge.store.JudgmentStore(project.path / "judgments")
    assert len(store.keys()) == 3
    # s3 leaves the golden set; s1 is skipped (first, so not judged ahead either): its judgment stays,
    # s3's can go.
    path.write_text("\n".join(map(json.dumps, golden[:2])))
    monkeypatch.setenv("SKIP_SAMPLES", "s1")
    skipping = project.runpytest("--rag-store-dir=judgments", "--rag-report")
    skipping.assert_outcomes(passed=1, skipped=1)
    skipping.stdout.fnmatch_lines(["*1 unused judgment store entries; remove them with: *prune*"])
    out = _pruned(project, capsys)
    assert "kept 1 store entry the last full run did not use: 1 skipped test may need them " in out
    assert "(test_golden.py::test_golden[s1])" in out and "deleted 1 of 3 store entries" in out
    monkeypatch.delenv("SKIP_SAMPLES")
    replay = project.runpytest("--rag-store-dir=judgments", "--rag-cache=replay", "--rag-cache-dir=empty")
    replay.assert_outcomes(passed=2)


def test_a_judge_reason_past_any_sentence_is_quoted_shortened_in_the_failure_and_the_report(pytester, monkeypatch):
    """A model that loops in its reason under a large completion limit (or a server ignoring the
    limit): the failure's why, the report's row and the Markdown summary quote its start, where each
    quoted it whole."""
    looping = "I think so. " * 10_000

    def responder(body: dict[str, Any]) -> dict[str, Any]:
        return {"reason": looping, "useful": False}

    with FakeJudgeServer(responder) as server:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        pytester.makepyfile(samples=SAMPLES)
        pytester.makepyfile(
            test_rag="""
            from pytest_ragmetrics import assert_context_precision
            from samples import GOOD

            def test_precision():
                assert_context_precision(GOOD) >= 0.5
        """
        )
        result = pytester.runpytest(
            "--rag-judge-max-tokens=100000", "--rag-report", "--rag-report-json=r.json", "--rag-report-md=r.md"
        )
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    result.stdout.fnmatch_lines(["*why: none of the 2 chunks is useful for the reference (chunk 1 (rank 1): I think so.*…*"])
    assert max(len(line) for line in output.splitlines()) < 2_000
    row = json.loads((pytester.path / "r.json").read_text())["results"][0]
    assert len(row["explanation"]) < 2_000
    assert row["samples"][0]["verdicts"][0]["reason"] == looping  # the verdict keeps it whole
    summary = (pytester.path / "r.md").read_text().splitlines()  # a GitHub step summary: 1 MiB at most
    assert max(len(line) for line in summary) < 2_000
    assert any(": **not useful** — I think so. I think so." in line and "…" in line for line in summary)
