"""The CLI's output layer (paddlecd.cli.view) without a terminal: which mode a process gets,
push progress read from docker's messages, plain lines with GitHub Actions folding, the log
file, the failure tail and the summary table."""

from __future__ import annotations

import io
import re
from pathlib import Path

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


BOOTSTRAP_DATA = Path(__file__).parent.parent / "data" / "bootstrap"
PUSH = ["5f70bf18a086 Preparing", "5f70bf18a086 Pushing [=>      ]  300MB/1.1GB",
        "5f70bf18a086 Pushing [========>]  1.1GB/1.1GB", "5f70bf18a086 Pushed"]


def replayed_bootstrap(clock: list[float], snapshots: list[str], buf: io.StringIO):
    """``bootstrap_and_lock`` replaying recorded output: debootstrap's (debian-installer mode)
    and pip's through their readers, then a push; the live view is drawn after each tool."""
    from paddlecd.image import bootstrap, downloads

    def replay(settings, variant, *, on_line, on_progress, on_transfer, **_):
        for reader, name in [(downloads.DebootstrapOutput, "debootstrap-debian-installer.txt"),
                             (downloads.PipOutput, "pip-raw-buildkit.txt")]:
            feed = reader(on_line, on_transfer)
            for line in (BOOTSTRAP_DATA / name).read_text().splitlines():
                feed(line)
                clock[0] += 0.05
            if view._proc.live is not None:
                view._proc.live.refresh()
                snapshots.append(buf.getvalue())
        for msg in PUSH:
            on_progress(msg)
            clock[0] += 1
        return bootstrap.Bootstrapped(variant, "sha256:" + "ab" * 32, None)

    return replay


@pytest.mark.parametrize("how", ["live", "plain"])
def test_bootstrap_shows_what_it_fetches_then_one_line(tmp_path, capsys, monkeypatch, how):
    """image.bootstrap on a terminal: a byte bar with bytes and rate for debootstrap's packages
    and pip's wheels under the spinner, collapsed into one result line at the end (read back
    with pyte); elsewhere plain lines, a few per download; the log keeps every line."""
    import pyte
    from invoke import Context
    from rich.console import Console

    from paddlecd.cli import common
    from paddlecd.cli import image as image_tasks
    from paddlecd.image import bootstrap

    clock, snapshots, buf = [100.0], [], io.StringIO()
    console = Console(file=buf, force_terminal=how == "live", width=100, height=40,
                      get_time=lambda: clock[0])
    monkeypatch.setattr(common, "err", console)
    monkeypatch.setattr(view, "mode", lambda **_: how)
    monkeypatch.setenv("PADDLECD_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(bootstrap, "bootstrap_and_lock", replayed_bootstrap(clock, snapshots, buf))
    image_tasks.bootstrap.body(Context(), variant="cpu")

    def screen(raw: str) -> list[str]:
        term = pyte.Screen(100, 40)
        term.set_mode(pyte.modes.LNM)
        pyte.ByteStream(term).feed(raw.encode())
        return [x.rstrip() for x in term.display if x.strip()]

    (log,) = (tmp_path / "state" / "logs").glob("base-cpu-*.log")
    logged = log.read_text().splitlines()
    assert "I: Retrieving adduser 3.134" in logged and "packages: 46.0 MB of 46.0 MB" in logged
    assert not [x for x in logged if re.match(r"(IA|IF|P): ", x) or "Progress " in x]
    result = "sha256:abababababab…  46.0 MB packages + 219.0 MB wheels, 1.1 GB pushed"
    assert f"base of 'cpu' pushed: sha256:{'ab' * 32}" in capsys.readouterr().out
    if how == "plain":
        err = buf.getvalue().splitlines()
        assert "\x1b" not in buf.getvalue() and err[0] == "▸ base cpu"
        assert [x for x in err if x.startswith("  packages:")] == ["  packages: 0 bytes of 46.0 MB",
                                                        "  packages: 46.0 MB of 46.0 MB"]
        assert err[-1].startswith("✔ base cpu ") and err[-1].endswith(result)
        return
    packages, wheels = (screen(s) for s in snapshots)
    assert any(x.startswith("⠋ base cpu") or "base cpu" in x[:12] for x in packages), packages
    bar = next(x for x in packages if x.startswith("  packages"))
    assert "46.0/46.0 MB" in bar and re.search(r"\d MB/s", bar), bar  # bytes and rate
    assert "  I: Validating zlib1g 1:1.2.13.dfsg-1" in packages  # the tool's last lines under it
    bar = next(x for x in wheels if x.startswith("  wheels"))
    # the rate on BuildKit's clock (the lines came in one burst): networkx's last 1,806,360 bytes
    # between 54.23 s and 54.24 s, as pip printed them
    assert "219.0/219.0 MB 180.6 MB/s" in bar, bar
    final = screen(buf.getvalue())
    assert len(final) == 1 and final[0].startswith("✔ base cpu ") and final[0].endswith(result)


def test_upload_bar_counts_the_bytes_moved(tmp_path, monkeypatch):
    """An upload's bar (``bytes_total`` then ``advance``: storage.Progress) shares the stage's
    byte bar with the downloads a tool reports."""
    import pyte
    from rich.console import Console

    from paddlecd.cli import common

    buf = io.StringIO()
    monkeypatch.setattr(common, "err", Console(file=buf, force_terminal=True, width=100))
    monkeypatch.setattr(view, "mode", lambda **_: "live")
    with view.stage("upload", "linear", state=tmp_path) as st:
        st.bytes_total(2_000_000)
        st.advance(500_000)
        st.advance(250_000)
        view._proc.live.refresh()
        term = pyte.Screen(100, 10)
        term.set_mode(pyte.modes.LNM)
        pyte.ByteStream(term).feed(buf.getvalue().encode())
        assert any(x.startswith("  bytes") and "0.8/2.0 MB" in x for x in term.display), \
            term.display


@pytest.mark.parametrize(("err", "hint"), [
    (30, "check the path and its permissions; the stage goes on without its log"),  # EROFS
    (28, "free space there (df -h {logs}); the stage goes on without its log"),  # ENOSPC
])
def test_a_log_that_cannot_be_written_gets_the_hint_of_its_cause(tmp_path, capsys, monkeypatch,
                                                                  err, hint):
    """Trial 11: a read-only state folder's stage log was hinted "free space there"."""
    import builtins
    import errno
    import os

    real = builtins.open

    def refuse(path, *a, **k):
        if str(path).startswith(str(tmp_path / "logs")):
            raise OSError(err, os.strerror(err), str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(view, "mode", lambda **_: "plain")
    monkeypatch.setattr(builtins, "open", refuse)
    with view.stage("upload", "m", state=tmp_path) as st:
        st.line("one")
        st.done("ok")
    out = capsys.readouterr().err
    assert f"hint: {hint.format(logs=tmp_path / 'logs')}" in out, out
    assert errno.errorcode[err]  # the two causes the hint tells apart


def _refuse_logs(monkeypatch, logs: Path) -> None:
    """``open`` refuses files under ``logs``, as a read-only mount does (EROFS)."""
    import builtins
    import errno
    import os

    real = builtins.open

    def refuse(path, *a, **k):
        if str(path).startswith(str(logs)):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real(path, *a, **k)

    monkeypatch.setattr(builtins, "open", refuse)


@pytest.mark.parametrize("how", ["plain", "live"])
def test_a_failed_stage_whose_log_was_lost_raises_its_own_error(tmp_path, capsys, monkeypatch,
                                                                 how):
    """Trial 15: with a read-only logs folder an upload to a read-only store failed with "No
    such file or directory: <state>/logs/upload-….log", "check the path": the failure's tail read
    the log it could not make, and that error replaced the store's."""
    monkeypatch.setattr(view, "mode", lambda **_: how)
    _refuse_logs(monkeypatch, tmp_path / "logs")
    with pytest.raises(PermissionError, match="the store"), view.stage(
            "upload", "m", state=tmp_path) as st:
        st.line("one")
        raise PermissionError("the store is read-only")
    err = capsys.readouterr().err
    assert "cannot be written: Read-only file system" in err and "last " not in err, err


def test_a_pipeline_unit_whose_log_cannot_be_written_goes_on(tmp_path, capsys, monkeypatch):
    """The same for pipeline.run's units: said once, the unit's lines still shown."""
    monkeypatch.setattr(view, "mode", lambda **_: "plain")
    _refuse_logs(monkeypatch, tmp_path / "logs")
    logs = view.UnitLogs(tmp_path)
    for i in range(3):
        logs.line("deploy", "cpu", f"rank 0: step {i}")
    logs.failed("deploy", "cpu")
    logs.close()
    err = capsys.readouterr().err
    assert err.count("cannot be written: Read-only file system") == 1, err
    assert "  cpu| rank 0: step 2" in err and "full log" not in err
