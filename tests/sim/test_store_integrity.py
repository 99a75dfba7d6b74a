"""A batch store fails closed (issue 38): damaged task files are found by their records,
resumed and reported on in one line each; a batch refused before its first task, or stopped
by Ctrl-C, leaves nothing a plain re-run refuses."""

from __future__ import annotations

import errno
import json
import shutil
import socket
from pathlib import Path

import pytest
from test_batch import _toml  # tests/sim/test_batch.py: the tiny sweep scenario

from mdpsim.cli import main
from mdpsim.experiments import store as store_mod
from mdpsim.experiments.store import load_manifest, task_table, verify


def _scenario(tmp_path: Path) -> Path:
    """test_batch's tiny scenario: a 2 x 2 sweep of 4 tasks."""
    return _toml(
        tmp_path / "tiny.toml", ['"mechanism.epsilon_per_km" = [2.0, 6.0]', "repetitions = 2"]
    )


def _batch(scenario: Path, out: Path, *extra: str) -> list[str]:
    return ["batch", str(scenario), "--out", str(out), "--workers", "1", "--no-progress", *extra]


@pytest.fixture(scope="module")
def built(tmp_path_factory, helsinki_walk):
    """A finished 4-task store and its scenario file (copied by each test that damages it)."""
    root = tmp_path_factory.mktemp("integrity")
    scenario = _scenario(root)
    assert main(_batch(scenario, root / "store")) == 0
    return scenario, root / "store"


def _copy(built, tmp_path: Path) -> tuple[Path, Path]:
    scenario, original = built
    out = tmp_path / "store"
    shutil.copytree(original, out)
    return scenario, out


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _alter(path: Path) -> None:  # same size, one byte changed in the middle
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


DAMAGE = {
    "truncated per-tick table": ("0001.parquet", _truncate, "0001.parquet is truncated"),
    "empty per-user table": ("0002.users.parquet", _empty, "0002.users.parquet is empty"),
    "altered timings": ("0003.timings.parquet", _alter, "0003.timings.parquet is altered"),
    "deleted per-tick table": ("0000.parquet", Path.unlink, "0000.parquet is missing"),
    "deleted record": ("0001.done.json", Path.unlink, "0001.parquet has no record"),
    "garbled record": ("0002.done.json", _truncate, "0002.done.json is damaged"),
}


def test_the_record_lists_every_file_with_its_size_and_checksum(built):
    _, out = built
    for task in load_manifest(out)["tasks"]:
        record = json.loads((out / "tasks" / f"{task['task_id']}.done.json").read_text())
        assert record["files"] == task["files"]  # the manifest carries a copy
        assert set(record["files"]) == {
            f"{task['task_id']}{s}.parquet" for s in (".users", ".timings", "")
        }
        for name, f in record["files"].items():
            assert (out / "tasks" / name).stat().st_size == f["bytes"] and len(f["sha256"]) == 64
    assert list(verify(out).done) == ["0000", "0001", "0002", "0003"]


#: two kinds of damage (a table, a record) in the default suite; every one in CI's slow run
DAMAGE_CASES = [
    case
    if case in ("truncated per-tick table", "garbled record")
    else pytest.param(case, marks=pytest.mark.slow)
    for case in DAMAGE
]


@pytest.mark.parametrize("case", DAMAGE_CASES)
def test_a_damaged_task_is_named_by_report_and_dashboard_and_redone_by_resume(
    built, tmp_path, capsys, case
):
    from mdpsim.dashboard import batch_data

    name, damage, said = DAMAGE[case]
    task = name[:4]
    scenario, out = _copy(built, tmp_path)
    before = {p.name: p.read_bytes() for p in (built[1] / "tasks").glob("*.parquet")}
    damage(out / "tasks" / name)

    assert main(["report", str(out)]) == 0  # the damaged task is left out, with one line
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"warning: task {task}: "), err
    assert said in lines[0] and "--resume" in lines[0] and "Traceback" not in err
    summary = (out / "report" / "summary.md").read_text()
    assert "tasks finished: 3 of 4" in summary and "damaged: 1" in summary and said in summary
    assert task_table(out).set_index("task_id").loc[task, "status"] == "damaged"

    batch = batch_data.load(out)
    assert batch.n_tasks == 4 and len(batch.tasks) == 3
    assert len(batch.damaged) == 1 and said in batch.damaged[0]

    assert main(_batch(scenario, out, "--resume")) == 0
    captured = capsys.readouterr()
    damaged = [line for line in captured.err.splitlines() if line.startswith("damaged:")]
    assert damaged == [f"damaged: task {task}: {lines[0].split(': ', 2)[2].split(';')[0]}; "
                       "running it again"]  # fmt: skip
    assert "4 of 4 finished (3 skipped as already done)" in captured.out
    after = {p.name: p.read_bytes() for p in (out / "tasks").glob("*.parquet")}
    timings = [n for n in before if ".timings" in n]
    assert {n: after[n] for n in before if n not in timings} == {
        n: before[n] for n in before if n not in timings
    }  # the redone task's tables are the same bytes (timings differ between runs)
    assert list(verify(out).done) == ["0000", "0001", "0002", "0003"] and not verify(out).damaged


def test_a_damaged_manifest_or_failures_file_is_one_line(built, tmp_path, capsys):
    scenario, out = _copy(built, tmp_path)
    (out / "failures.json").write_text("{not json")
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "failures.json is damaged" in err
    (out / "manifest.json").write_text('{"tasks": 3}')
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "manifest.json is damaged" in err
    assert main(_batch(scenario, out, "--resume")) == 2
    assert "manifest.json is damaged" in capsys.readouterr().err


# ---------------------------------------------------------------------- nothing half-made
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--scheduler", "tcp://"], "--scheduler 'tcp://' must be an address like"),
        (["--scheduler", "localhost:8786"], "must be an address like tcp://HOST:PORT"),
        (["--scheduler", "UNREACHABLE"], "cannot reach the Dask scheduler"),
        (["--scheduler", "tcp://127.0.0.1:1", "--connect-timeout", "-1"], "--connect-timeout"),
        (["--connect-timeout", "nan"], "--connect-timeout=nan must be seconds"),
        (["--workers", "0"], "--workers=0 must be"),
        (["--workers", "99999999999"], "--workers=99999999999 must be <= 1024"),
        (["--threads-per-task", "0"], "--threads-per-task"),
    ],
)
def test_a_batch_refused_before_its_first_task_leaves_no_store(
    tmp_path, capsys, helsinki_walk, flags, message
):
    if "UNREACHABLE" in flags:
        with socket.socket() as sock:  # a port nobody listens on
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        flags = [f"tcp://127.0.0.1:{port}" if f == "UNREACHABLE" else f for f in flags]
        flags += ["--connect-timeout", "1"]
    out = tmp_path / "store"
    argv = ["batch", str(_scenario(tmp_path)), "--out", str(out), "--no-progress", *flags]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err
    assert not out.exists()


def test_ctrl_c_is_one_line_and_a_plain_rerun_accepts_what_it_left(
    tmp_path, capsys, monkeypatch, helsinki_walk
):
    import mdpsim.experiments.batch

    run_task = mdpsim.experiments.batch.run_task
    calls = []

    def interrupted(scenario, task, threads=None):
        calls.append(task.task_id)
        if len(calls) in (1, 4):  # before the first task; then after two more finished
            raise KeyboardInterrupt
        return run_task(scenario, task, threads)

    monkeypatch.setattr(mdpsim.experiments.batch, "run_task", interrupted)
    scenario, out = _scenario(tmp_path), tmp_path / "store"
    assert main(_batch(scenario, out)) == 130
    err = capsys.readouterr().err
    assert err == (
        f"interrupted: batch interrupted; 0 of 4 tasks finished and are kept in {out}: run the "
        "same command with --resume to continue\n"
    )
    assert main(_batch(scenario, out)) == 130  # a plain re-run: the empty store is accepted
    assert "2 of 4 tasks finished" in capsys.readouterr().err
    assert main(_batch(scenario, out)) == 2  # now it holds tasks: --resume is needed
    assert "pass --resume" in capsys.readouterr().err
    assert main(_batch(scenario, out, "--resume")) == 0
    assert "4 of 4 finished (2 skipped as already done)" in capsys.readouterr().out


def test_a_full_disk_mid_batch_says_where_the_finished_tasks_are(
    tmp_path, capsys, monkeypatch, helsinki_walk
):
    write = store_mod._write_parquet
    writes = []

    def filling(df, path):
        writes.append(path.name)
        if len(writes) == 7:  # the first file of the third task
            raise OSError(errno.ENOSPC, "No space left on device")
        write(df, path)

    monkeypatch.setattr(store_mod, "_write_parquet", filling)
    scenario, out = _scenario(tmp_path), tmp_path / "store"
    assert main(_batch(scenario, out)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write task 0002" in err and "No space left" in err
    assert f"2 of 4 tasks finished and are kept in {out}" in err and "--resume" in err
    assert list(verify(out).done) == ["0000", "0001"] and not verify(out).damaged
    monkeypatch.setattr(store_mod, "_write_parquet", write)
    assert main(_batch(scenario, out, "--resume")) == 0
    assert "4 of 4 finished (2 skipped" in capsys.readouterr().out
