"""What the suite's own pytest runs (pytester's, the example project's, the docs') leave out, and a
conftest they share."""

#: Installed plugins no run of this suite uses: Hypothesis's imports all of Hypothesis at the end of
#: every run, anyio's and platformdirs' their packages at its start. Together they cost about a second
#: and a half of CPU a process, in every subprocess and every xdist worker.
SPARE_PLUGINS = "-p no:hypothesispytest -p no:anyio -p no:platformdirs"

#: A conftest writing how many times the tests handed work to the judging loop (to ``handovers``).
COUNT_HANDOVERS = """
import pathlib, pytest
from pytest_ragmetrics.plugin import session_key

@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    if nextitem is None:
        runner = item.config.stash[session_key].runner
        pathlib.Path("handovers").write_text(str(runner.handovers))
"""
