"""`mdpsim batch`: sweep expansion, derived seeds, the results store, backends, failures, resume."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from mdpsim.cli import main
from mdpsim.errors import InputError
from mdpsim.experiments.backends import Backend
from mdpsim.experiments.batch import connect_dask, expand, run_batch
from mdpsim.experiments.store import (
    load_failures,
    load_manifest,
    load_ticks,
    load_timings,
    load_users,
    swept_fields,
    task_table,
)
from mdpsim.simulation import scenario as sc

SWEEP = {"mechanism.epsilon_per_km": [2.0, 6.0], "repetitions": 2}


@pytest.fixture(scope="module")
def tiny(make_scenario):
    """``tiny(sweep=SWEEP, **tables)``: 12 users on Helsinki, 4 tasks by default."""
    base = make_scenario.but(
        scenario={"name": "tiny", "seed": 7, "ticks": 2},
        network=None,
        domain={"n_points": 100},
        users={"count": 12},
        mechanism={"epsilon_per_km": 4.0},
    )
    return lambda sweep=SWEEP, **tables: base(sweep=sweep, **tables)


def _toml(path: Path, sweep_lines: list[str], extra: str = "") -> Path:
    text = f"""
[scenario]
name = "tiny"
seed = 7
ticks = 2
[domain]
n_points = 100
[users]
count = 12
[mechanism]
name = "em"
epsilon_per_km = 4.0
{extra}
[sweep]
{chr(10).join(sweep_lines)}
"""
    path.write_text(text)
    return path


def _task_files(store: Path) -> dict[str, bytes]:
    """Bytes of the deterministic files (per-tick and per-user tables), by name."""
    return {
        p.name: p.read_bytes()
        for p in sorted((store / "tasks").glob("*.parquet"))
        if ".timings" not in p.name
    }


@pytest.fixture(scope="module")
def serial_store(tmp_path_factory, helsinki_walk, tiny):
    store = tmp_path_factory.mktemp("batch") / "serial"
    outcome = run_batch(tiny(), store, backend=Backend(workers=1), progress=False)
    assert outcome.ok and outcome.n_done == 4
    return store


# ---------------------------------------------------------------------- expansion and seeds
def test_sweep_expands_to_every_combination_times_repetitions(tiny):
    s = tiny({"mechanism.epsilon_per_km": [2, 6, 10], "users.count": [5, 8], "repetitions": 3})
    tasks = expand(s)
    assert len(tasks) == 18
    assert [t.task_id for t in tasks] == [f"{i:04d}" for i in range(18)]
    assert tasks[0].params == {"mechanism.epsilon_per_km": 2.0, "users.count": 5}
    assert isinstance(tasks[0].params["mechanism.epsilon_per_km"], float)  # normalised
    assert [t.repetition for t in tasks[:4]] == [0, 1, 2, 0]
    assert tasks[3].params == {"mechanism.epsilon_per_km": 2.0, "users.count": 8}
    assert tasks[-1].params == {"mechanism.epsilon_per_km": 10.0, "users.count": 8}


def test_no_sweep_gives_one_task_per_repetition(tiny):
    assert len(expand(tiny({}))) == 1
    assert len(expand(tiny({"repetitions": 4}))) == 4


def test_task_seeds_come_from_values_and_repetition_not_from_order(tiny):
    forward = expand(tiny({"mechanism.epsilon_per_km": [2.0, 6.0, 9.0], "repetitions": 2}))
    backward = expand(tiny({"mechanism.epsilon_per_km": [9, 6, 2], "repetitions": 2}))

    def by_key(tasks):
        return {(t.params["mechanism.epsilon_per_km"], t.repetition): t.seed for t in tasks}

    assert by_key(forward) == by_key(backward)
    assert len({t.seed for t in forward}) == 6
    reseeded = expand(tiny(scenario={"seed": 8}))
    assert not {t.seed for t in reseeded} & {t.seed for t in expand(tiny())}
    common = expand(tiny(), seeding="common")
    assert common[0].seed == common[2].seed and common[0].seed != common[1].seed


def test_bad_sweep_is_a_clear_error(tmp_path, capsys, tiny):
    bad_value = _toml(tmp_path / "a.toml", ['"users.count" = [5, 0]'])
    assert main(["batch", str(bad_value), "--out", str(tmp_path / "o1")]) == 2
    assert "users.count" in capsys.readouterr().err
    bad_key = _toml(tmp_path / "b.toml", ['"users.speed" = [1.0]'])
    assert main(["batch", str(bad_key), "--out", str(tmp_path / "o2")]) == 2
    assert "users.speed" in capsys.readouterr().err
    with pytest.raises(InputError, match="nope"):
        expand(tiny({"mechanism.name": ["em", "nope"]}))
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()


def test_unreachable_scheduler_is_a_clear_error(tmp_path, tiny):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    start = time.monotonic()
    with pytest.raises(InputError, match="cannot reach the Dask scheduler"):
        connect_dask(scheduler=f"tcp://127.0.0.1:{port}", connect_timeout_s=0.2)
    assert time.monotonic() - start < 30
    with pytest.raises(InputError, match="tcp://HOST:PORT"):
        connect_dask(scheduler="localhost:8786")
    with pytest.raises(InputError, match="not both"):
        run_batch(tiny(), tmp_path / "x", backend=Backend(scheduler="tcp://a:1", dask_workers=1))


# ---------------------------------------------------------------------- the store
def test_store_holds_one_table_per_task_with_its_parameters(serial_store):
    manifest = load_manifest(serial_store)
    assert [t["status"] for t in manifest["tasks"]] == ["done"] * 4
    assert swept_fields(serial_store) == ["mechanism.epsilon_per_km"]
    for t in manifest["tasks"]:
        df = pd.read_parquet(serial_store / "tasks" / f"{t['task_id']}.parquet")
        assert list(df.columns[:4]) == ["task_id", "repetition", "seed", "mechanism.epsilon_per_km"]
        assert (df["task_id"] == t["task_id"]).all() and (df["seed"] == t["seed"]).all()
        assert (df["epsilon_per_km"] == t["params"]["mechanism.epsilon_per_km"]).all()
        assert list(df["tick"]) == [1, 2]
    ticks = load_ticks(serial_store)
    assert len(ticks) == 8 and not ticks.duplicated(["task_id", "tick"]).any()
    timings = load_timings(serial_store)
    assert {"task_id", "mechanism_s", "regenerated"} <= set(timings.columns)
    assert "mechanism_s" not in ticks  # wall-clock times stay out of the per-tick tables
    assert len(load_users(serial_store)) == 4 * 2 * 12
    assert json.loads((serial_store / "failures.json").read_text()) == {}


def test_existing_store_requires_resume_and_the_same_scenario(serial_store, tiny):
    with pytest.raises(InputError, match="--resume"):
        run_batch(tiny(), serial_store, progress=False)
    other = tiny({"mechanism.epsilon_per_km": [2.0, 7.0], "repetitions": 2})
    with pytest.raises(InputError, match="different"):
        run_batch(other, serial_store, resume=True, progress=False)
    before = {p.name: p.stat().st_mtime_ns for p in (serial_store / "tasks").iterdir()}
    stale = serial_store / "tasks" / ".0001.parquet.tmp-999"
    stale.write_bytes(b"half a file")
    outcome = run_batch(tiny(), serial_store, resume=True, progress=False)
    assert outcome.ok and outcome.n_skipped == 4
    assert not stale.exists()
    after = {p.name: p.stat().st_mtime_ns for p in (serial_store / "tasks").iterdir()}
    assert after == before  # nothing rerun or rewritten


def test_dask_local_cluster_gives_the_same_bytes_as_one_worker(serial_store, tmp_path, tiny):
    store = tmp_path / "dask"
    outcome = run_batch(
        tiny(), store, backend=Backend(dask_workers=2, dask_processes=False), progress=False
    )
    assert outcome.ok
    assert _task_files(store) == _task_files(serial_store)


@pytest.mark.slow
def test_two_worker_processes_give_the_same_bytes_as_one_worker(serial_store, tmp_path, tiny):
    store = tmp_path / "pool"
    outcome = run_batch(tiny(), store, backend=Backend(workers=2), progress=False)
    assert outcome.ok
    files = _task_files(store)
    assert len(files) == 8 and files == _task_files(serial_store)


# ---------------------------------------------------------------------- failures and resume
def _fail_task(monkeypatch, seed_of_failing_task: int) -> None:
    """Make the in-process task with this seed raise when it runs (after the checks)."""
    import mdpsim.experiments.run

    simulate = mdpsim.experiments.run.simulate

    def flaky(scenario, *, seed=None, **kw):
        if seed == seed_of_failing_task:
            raise RuntimeError("solver gave up on this task")
        return simulate(scenario, seed=seed, **kw)

    monkeypatch.setattr(mdpsim.experiments.run, "simulate", flaky)


def test_a_failed_task_is_recorded_and_does_not_stop_the_batch(
    tmp_path, capsys, monkeypatch, helsinki_walk
):
    path = _toml(tmp_path / "f.toml", ['"users.count" = [12, 13]'])
    failing = expand(sc.load(path))[1]
    _fail_task(monkeypatch, failing.seed)
    store = tmp_path / "store"
    argv = ["batch", str(path), "--out", str(store), "--workers", "1", "--no-progress"]
    assert main(argv) == 3  # partial: the other task is written
    failures = load_failures(store)
    assert list(failures) == ["0001"] and "solver gave up" in failures["0001"]
    table = task_table(store)
    assert list(table["status"]) == ["done", "failed"]
    assert "RuntimeError" in table.loc[1, "error"]
    assert (store / "tasks" / "0000.parquet").is_file()
    assert not (store / "tasks" / "0001.parquet").exists()
    err = capsys.readouterr().err  # failures summarised on stderr, one line each
    assert "failed: task 0001: RuntimeError: solver gave up on this task" in err
    assert "Traceback" not in err and "--overwrite" in err
    assert main([*argv, "--resume"]) == 3  # the failed task is retried, the done one skipped
    assert "1 skipped" in capsys.readouterr().out


# ---------------------------------------------------------------------- checked up front
@pytest.mark.parametrize(
    ("sweep_line", "message"),
    [
        ('"network.source" = ["helsinki", "MISSING"]', "field network.source: .*file not found"),
        ('"domain.n_points" = [100, 1000000000]', "field domain.n_points = 1,000,000,000 is more"),
        ('"domain.n_outputs" = [0, 1000000000]', "field domain.n_outputs = 1,000,000,000 is more"),
    ],
)
def test_bad_task_parameters_exit_2_before_any_store_exists(
    tmp_path, capsys, helsinki_walk, sweep_line, message
):
    line = sweep_line.replace("MISSING", str(tmp_path / "missing.graphml"))
    path = _toml(tmp_path / "bad.toml", [line])
    store = tmp_path / "store"
    assert main(["batch", str(path), "--out", str(store), "--workers", "1", "--no-progress"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ")
    assert re.search(f"task 0001 .*{message}", err), err
    assert not store.exists() and "Traceback" not in err


def test_one_output_point_is_refused_when_the_scenario_loads(tmp_path, tiny):
    with pytest.raises(InputError, match=r"domain.n_outputs = 1 must be 0 \(Y = X\) or >= 2"):
        tiny({"domain.n_outputs": [0, 1]})


def test_a_failed_batch_reruns_after_a_fix_with_overwrite(tmp_path, monkeypatch, helsinki_walk):
    path = _toml(tmp_path / "f.toml", ['"users.count" = [12, 13]'])
    _fail_task(monkeypatch, expand(sc.load(path))[1].seed)
    store = tmp_path / "store"
    assert not run_batch(sc.load(path), store, progress=False).ok
    fixed = _toml(tmp_path / "f.toml", ['"users.count" = [12, 14]'])  # the fix
    with pytest.raises(InputError, match="--overwrite"):
        run_batch(sc.load(fixed), store, resume=True, progress=False)
    with pytest.raises(InputError, match="--overwrite"):
        run_batch(sc.load(fixed), store, progress=False)
    outcome = run_batch(sc.load(fixed), store, overwrite=True, progress=False)
    assert outcome.ok and outcome.n_skipped == 0 and outcome.failures == {}
    assert load_failures(store) == {}
    assert sorted(task_table(store)["users.count"]) == [12, 14]
    with pytest.raises(InputError, match="not both"):
        run_batch(sc.load(fixed), store, overwrite=True, resume=True, progress=False)


def test_overwrite_never_deletes_a_folder_that_is_not_a_store(tmp_path, helsinki_walk, tiny):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    with pytest.raises(InputError, match="not a batch store"):
        run_batch(tiny(), folder, overwrite=True, progress=False)
    assert (folder / "notes.txt").read_text() == "keep me"


@pytest.mark.slow
def test_batch_killed_with_sigkill_and_resumed_loses_and_duplicates_nothing(
    tmp_path, helsinki_walk, tiny
):
    sweep = {"mechanism.epsilon_per_km": [2.0, 4.0, 6.0, 8.0], "repetitions": 2}
    path = _toml(tmp_path / "k.toml", ['"mechanism.epsilon_per_km" = [2.0, 4.0, 6.0, 8.0]',
                                       "repetitions = 2"])  # fmt: skip
    store = tmp_path / "killed"
    cmd = [sys.executable, "-m", "mdpsim.cli", "batch", str(path), "--out", str(store)]
    proc = subprocess.Popen(
        [*cmd, "--workers", "1", "--no-progress"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def finished() -> list[str]:
        folder = store / "tasks"
        if not folder.is_dir():
            return []
        return [p.name for p in folder.glob("*.done.json")]  # a task's record marks it done

    deadline = time.monotonic() + 300
    while not finished() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_at_kill = finished()
    assert 1 <= len(done_at_kill) < 8, "the batch must be killed part-way"

    outcome = run_batch(tiny(sweep), store, resume=True, progress=False)
    assert outcome.ok and outcome.n_skipped == len(done_at_kill)
    reference = tmp_path / "reference"
    assert run_batch(tiny(sweep), reference, progress=False).ok
    assert _task_files(store) == _task_files(reference)
    ticks = load_ticks(store)
    assert len(ticks) == 8 * 2 and not ticks.duplicated(["task_id", "tick"]).any()
    assert not list((store / "tasks").glob(".*"))
    manifest = load_manifest(store)
    assert [t["status"] for t in manifest["tasks"]] == ["done"] * 8


def test_a_domain_larger_than_memory_is_refused_up_front(tmp_path, capsys, monkeypatch):
    import mdpsim.geo.domain

    monkeypatch.setattr(
        mdpsim.geo.domain, "physical_memory_bytes", lambda: 2**20
    )  # a 1 MiB machine
    path = _toml(tmp_path / "big.toml", ['"domain.n_points" = [100, 400]'])
    store = tmp_path / "store"
    assert main(["batch", str(path), "--out", str(store), "--workers", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "task 0001 " in err and "field domain.n_points: n_points=400: " in err
    assert "need 1.2 MiB, more than this machine's 1.0 MiB of memory" in err
    assert not store.exists()
