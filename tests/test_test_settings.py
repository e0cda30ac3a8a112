"""One test's settings, resolved without pytest: the run's, its ``ragmetrics_config``, its markers."""

import re
from pathlib import Path

import pytest

from pytest_ragmetrics.errors import ConfigError
from pytest_ragmetrics.loaders import load_marker_samples, marker_samples_path
from pytest_ragmetrics.settings import Settings, check_marker, for_test

ROOT = Path("/project")


def test_without_changes_the_run_settings_are_returned_as_they_are():
    run = Settings(judge_model="m")
    assert for_test(run, config={}, markers=[], root=ROOT) is run


def test_the_closest_marker_beats_a_farther_one_and_the_config_fixture():
    run = Settings(judge_model="run")
    settings = for_test(
        run,
        config={"judge_model": "config", "temperature": 0.5},
        markers=[{"judge_model": "module"}, {"judge_model": "test", "method": "binary"}],
        root=ROOT,
    )
    assert (settings.judge_model, settings.temperature, settings.relevance_method) == ("test", 0.5, "binary")


def test_a_relative_path_from_a_test_is_under_the_rootdir():
    settings = for_test(Settings(), config={"cache_dir": "cache"}, root=ROOT)
    assert settings.cache_dir == str(ROOT / "cache")


def test_a_run_wide_setting_in_the_config_fixture_is_refused_by_name():
    with pytest.raises(ConfigError, match="ragmetrics_config: report_json applies to the whole run"):
        for_test(Settings(), config={"report_json": "r.json"}, root=ROOT)


def test_a_bad_value_names_the_setting():
    with pytest.raises(ConfigError, match="ragmetrics settings: temperature must be a number"):
        for_test(Settings(), markers=[{"temperature": "hot"}], root=ROOT)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("gpt-4o",), {}, "keyword arguments only"),
        ((), {"gates": ["x"]}, "gates applies to the whole run"),
        ((), {"judge_modle": "m"}, "unknown @pytest.mark.ragmetrics argument(s) judge_modle"),
        ((), {"temperature": "hot"}, "@pytest.mark.ragmetrics: temperature must be a number"),
    ],
)
def test_a_bad_marker_is_a_config_error_saying_what_is_wrong(args, kwargs, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_marker(args, kwargs)


def test_a_good_marker_passes():
    check_marker((), {"samples": "golden.jsonl", "method": "binary", "judge_model": "m"})


def test_a_marker_samples_file_is_found_beside_the_test_before_the_rootdir(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "golden.jsonl").write_text('{"question": "beside?"}\n')
    (tmp_path / "golden.jsonl").write_text('{"question": "root?"}\n')
    (tmp_path / "only_root.jsonl").write_text('{"question": "root only?"}\n')
    test_file = tmp_path / "tests" / "test_x.py"
    assert marker_samples_path("golden.jsonl", test_file, tmp_path) == tmp_path / "tests" / "golden.jsonl"
    assert marker_samples_path("only_root.jsonl", test_file, tmp_path) == tmp_path / "only_root.jsonl"


def test_a_missing_or_bad_marker_samples_file_names_the_marker_and_the_problem(tmp_path):
    test_file = tmp_path / "test_x.py"
    with pytest.raises(ValueError, match=r"samples='none.jsonl'\): no such file: .*none.jsonl"):
        load_marker_samples("none.jsonl", marker_samples_path("none.jsonl", test_file, tmp_path))
    (tmp_path / "bad.jsonl").write_text('{"question": 5}\n')
    with pytest.raises(ValueError, match=r"samples='bad.jsonl'\): bad.jsonl, line 1: field 'question'"):
        load_marker_samples("bad.jsonl", marker_samples_path("bad.jsonl", test_file, tmp_path))


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"markers": [{"judge_n": 2.5}]}, "ragmetrics settings: judge_n must be an integer; got 2.5"),
        ({"config": {"seed": 7.9}}, "ragmetrics settings: seed must be an integer; got 7.9"),
    ],
)
def test_a_fraction_given_for_an_integer_setting_is_refused_not_cut(given, message):
    """int() would make 2.5 answers 2 and seed 7.9 seed 7, without a word."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        for_test(Settings(), root=ROOT, **given)


def test_a_fraction_given_to_settings_for_an_integer_is_refused_and_a_whole_float_is_taken():
    with pytest.raises(ConfigError, match=re.escape("Settings.max_judge_calls must be an integer; got 10.9")):
        Settings(max_judge_calls=10.9)  # type: ignore[arg-type]  # what a script may pass all the same
    assert Settings(concurrency=4.0).concurrency == 4  # type: ignore[arg-type]
