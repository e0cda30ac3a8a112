"""What the suite's own pytest runs (pytester's, the example project's, the docs') leave out."""

#: Installed plugins no run of this suite uses: Hypothesis's imports all of Hypothesis at the end of
#: every run, anyio's and platformdirs' their packages at its start. Together they cost about a second
#: and a half of CPU a process, in every subprocess and every xdist worker.
SPARE_PLUGINS = "-p no:hypothesispytest -p no:anyio -p no:platformdirs"
