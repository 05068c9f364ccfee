"""The CLI's output layer (paddlecd.cli.view) without a terminal: which mode a process gets,
push progress read from docker's messages, plain lines with GitHub Actions folding, the log
file, the failure tail and the summary table."""

from __future__ import annotations

import pytest

from paddlecd.cli import view


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch):
    monkeypatch.setattr(view, "_proc", view._Process(hooked=True))  # no atexit hook in tests
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("PADDLECD_VERBOSE", raising=False)
    monkeypatch.delenv("PADDLECD_RUNTIME_VERBOSE", raising=False)


@pytest.mark.parametrize("env, argv, terminal, expected", [
    ({}, ["invoke", "build"], True, "live"),
    ({"CI": "true"}, ["invoke", "build"], True, "plain"),
    ({}, ["invoke", "build"], False, "plain"),
    ({"PADDLECD_VERBOSE": "1"}, ["invoke", "build"], True, "verbose"),
    ({}, ["invoke", "build", "push", "--verbose"], True, "verbose"),
    ({"CI": "false"}, ["invoke", "build"], True, "live"),
])
def test_mode(env, argv, terminal, expected):
    assert view.mode(env, argv, terminal=terminal) == expected


@pytest.mark.parametrize("msg, expected", [
    ("5f70bf18a086 Pushing [==>      ]  12.5MB/45.67MB",
     ("5f70bf18a086", "Pushing", 12_500_000, 45_670_000)),
    ("5f70bf18a086 Pushing [=====>   ]  512kB/1.024MB",
     ("5f70bf18a086", "Pushing", 512_000, 1_024_000)),
    ("5f70bf18a086 Layer already exists", ("5f70bf18a086", "Layer already exists", None, None)),
    ("cpu-1a2b3c4: digest: sha256:ab size: 1234", ("cpu-1a2b3c4:", "digest: sha256:ab size: 1234",
                                                   None, None)),
])
def test_layer_bytes_reads_docker_progress(msg, expected):
    assert view.layer_bytes(msg) == expected


def test_plain_stage_on_github_actions_folds_tool_output(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setattr(view, "mode", lambda **_: "plain")
    with view.stage("push", "cpu", state=tmp_path) as st:
        st.progress("aa Pushing [=>  ]  1MB/2MB")
        st.progress("aa Pushing [==> ]  1.5MB/2MB")  # same status within 5 s: not repeated
        st.progress("aa Pushed")
        st.done(f"sha256:0123… {view.human_bytes(st.bytes_pushed)} pushed")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "::group::push cpu" and lines[-2] == "::endgroup::"
    assert lines[1:-2] == ["  aa Pushing [=>  ]  1MB/2MB", "  aa Pushed"]
    assert lines[-1].startswith("✔ push cpu ") and lines[-1].endswith("sha256:0123… 2.0 MB pushed")
    (log,) = (tmp_path / "logs").glob("push-cpu-*.log")
    assert len(log.read_text().splitlines()) == 3  # every message, in full


def test_failure_prints_the_last_lines_and_the_log_path(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(view, "mode", lambda **_: "plain")
    with pytest.raises(RuntimeError), view.stage("build", "cpu", state=tmp_path) as st:
        for i in range(1, 31):
            st.line(f"step line {i}")
        raise RuntimeError("exit code 1")
    err = capsys.readouterr().err.splitlines()
    (log,) = (tmp_path / "logs").glob("build-cpu-*.log")
    head = err.index(f"  last 20 lines of {log}:")
    assert err[head - 1].startswith("✘ build cpu ") and err[head - 1].endswith("failed")
    assert err[head + 1:] == [f"  │ step line {i}" for i in range(11, 31)]
    assert log.read_text().splitlines() == [f"step line {i}" for i in range(1, 31)]


def test_summary_table_after_two_stages_only(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(view, "mode", lambda **_: "plain")
    with view.stage("build", "cpu", state=tmp_path) as st:
        st.done("reg/paddle:cpu-1a2b3c4")
    assert view.summary() == []
    with view.stage("verify", "cpu", state=tmp_path) as st:
        st.done("9 passed, 2 skipped", failed=False)
    view.finish()
    view.finish()  # once per process
    err = capsys.readouterr().err.splitlines()
    table = err[err.index(next(x for x in err if x.startswith("stage "))):]
    assert [x.split()[:4] for x in table] == [
        ["stage", "variant", "result", "key"], ["build", "cpu", "✔", "ok"],
        ["verify", "cpu", "✔", "ok"]]
    assert "9 passed, 2 skipped" in table[2] and "{" not in "".join(err)


def test_refused_before_any_output_leaves_only_the_error(tmp_path, capsys, monkeypatch):
    """Bad input (an unknown variant) fails before a tool runs: no stage lines, no log file, so
    the catch site's error and hint stay the only lines."""
    monkeypatch.setattr(view, "mode", lambda **_: "plain")
    with pytest.raises(ValueError), view.stage("build", "cpuu", state=tmp_path):
        raise ValueError("unknown variant 'cpuu'")
    assert capsys.readouterr().err == "" and not (tmp_path / "logs").exists()
    assert view.summary() == []


@pytest.mark.parametrize("how", ["plain", "live"])
def test_pipeline_units_keep_their_output_in_log_files(tmp_path, capsys, monkeypatch, how):
    monkeypatch.setattr(view, "mode", lambda **_: how)
    logs = view.UnitLogs(tmp_path)
    for i in range(25):
        logs.line("build", "cpu", f"#{i} step")
    logs.line("build", "cu126", "other unit")
    logs.failed("build", "cpu")
    logs.close()
    (log,) = (tmp_path / "logs").glob("build-cpu-*.log")
    assert log.read_text().splitlines() == [f"#{i} step" for i in range(25)]
    err = capsys.readouterr().err.splitlines()
    if how == "plain":  # streamed as it came, then where the whole of it is
        assert err[0] == "  cpu| #0 step" and err[-1] == f"  full log: {log}"
    else:  # a terminal sees only the failed unit's tail
        assert err == [f"  last 20 lines of {log}:", *(f"  │ #{i} step" for i in range(5, 25))]


def test_pipeline_units_run_under_the_live_view_on_a_terminal(tmp_path, monkeypatch):
    """Issue 23: pipeline.run on a terminal shows each running unit as build/push/verify show a
    stage (spinner row, elapsed time, its tool's last lines), and the row gives way to the
    unit's result line; read back with pyte, as a terminal shows it."""
    import io

    import pyte
    from rich.console import Console

    from paddlecd.cli import common

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=80, height=24)
    monkeypatch.setattr(common, "err", console)
    monkeypatch.setattr(view, "mode", lambda **_: "live")
    logs = view.UnitLogs(tmp_path)
    logs.started("build", ["cpu", "cu126"])
    logs.line("build", "cpu", "#5 RUN pip install paddle")
    logs._live.refresh()
    screen = pyte.Screen(80, 24)
    screen.set_mode(pyte.modes.LNM)  # a tty's onlcr: "\n" also returns the carriage
    stream = pyte.ByteStream(screen)
    stream.feed(buf.getvalue().encode())
    shown = [x.rstrip() for x in screen.display if x.strip()]
    assert any(x.endswith("build cpu  0s") for x in shown), shown
    assert "  #5 RUN pip install paddle" in shown and any("build cu126" in x for x in shown)
    logs.ended("cpu")
    with logs.printing():
        console.print("✔ build       cpu         ok")
    logs.ended_all()
    with logs.printing():
        pass
    logs.close()
    screen.reset()
    screen.set_mode(pyte.modes.LNM)
    stream.feed(buf.getvalue().encode())
    shown = [x.rstrip() for x in screen.display if x.strip()]
    assert shown == ["✔ build       cpu         ok"], shown  # the rows are gone, the result stays
