"""mdpsim.env.vector_env: N independent single-agent games stepped together."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from mdpsim.env import single_agent_env, to_sb3, vector_env


@pytest.fixture(scope="module")
def scenario(make_scenario):
    return make_scenario(
        scenario={"name": "vec", "seed": 3, "ticks": 4},
        domain={"n_points": 40},
        users={"count": 3},
    )


def _play(env, steps: int, actions) -> tuple[list, list]:
    obs_seen, rewards_seen = [], []
    for _ in range(steps):
        obs, reward, *_ = env.step(actions)
        obs_seen.append(np.asarray(obs).copy())
        rewards_seen.append(np.asarray(reward).copy())
    return obs_seen, rewards_seen


def test_the_spaces_and_the_autoreset_mode_are_stated(scenario):
    vec = vector_env(scenario, num_envs=3, agent="user_0")
    single = single_agent_env(scenario, agent="user_0")
    assert vec.num_envs == 3
    assert vec.single_observation_space == single.observation_space
    assert vec.single_action_space == single.action_space
    assert vec.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    obs, _ = vec.reset()
    assert obs.shape == (3, *single.observation_space.shape)


def test_env_i_plays_the_single_env_on_seed_s_plus_i_and_episodes_continue(scenario):
    vec = vector_env(scenario, num_envs=2, agent="user_0")
    vec.reset(seed=11)
    obs_v, rew_v = _play(vec, 4, np.ones(2, dtype=np.int64))
    for i in range(2):
        single = single_agent_env(scenario, agent="user_0")
        single.reset(seed=11 + i)
        obs_s, rew_s = _play(single, 4, 1)
        assert np.array_equal(np.stack([o[i] for o in obs_v]), np.stack(obs_s))
        assert np.array_equal(np.array([r[i] for r in rew_v]), np.array(rew_s))
    _, _, _, truncated, _ = vec.step(np.ones(2, dtype=np.int64))  # NEXT_STEP: the reset
    assert not truncated.any()
    _, rewards, _, _, _ = vec.step(np.ones(2, dtype=np.int64))
    assert rewards[0] != rewards[1]  # the new episodes are independent games


def test_same_seed_same_trajectories_and_the_first_reset_replays_the_scenario(scenario):
    runs = []
    for _ in range(2):
        vec = vector_env(scenario, num_envs=2, agent="user_0")
        vec.reset()
        runs.append(_play(vec, 10, np.ones(2, dtype=np.int64)))  # past one autoreset
    assert all(np.array_equal(a, b) for a, b in zip(runs[0][1], runs[1][1], strict=True))
    single = single_agent_env(scenario, agent="user_0")
    single.reset()  # the scenario's own seed
    _, rew_s = _play(single, 4, 1)
    assert np.array_equal(np.array([r[0] for r in runs[0][1][:4]]), np.array(rew_s))


def test_a_bad_count_is_refused(scenario):
    with pytest.raises(ValueError, match="num_envs"):
        vector_env(scenario, num_envs=0)


def test_the_sb3_vec_env_resets_in_the_same_step_and_keeps_the_terminal_obs(scenario):
    pytest.importorskip("stable_baselines3")
    with pytest.raises(ValueError, match="SameStep"):
        to_sb3(vector_env(scenario, num_envs=2, agent="user_0"))
    env = to_sb3(vector_env(scenario, num_envs=2, agent="user_0", autoreset_mode="SameStep"))
    env.seed(5)
    first = env.reset()
    assert first.shape == (2, 8)
    for _ in range(4):
        env.step_async(np.ones(2, dtype=np.int64))
        obs, rewards, dones, infos = env.step_wait()
        assert rewards.shape == (2,)
    assert dones.all() and all("terminal_observation" in info for info in infos)
    assert obs.shape == first.shape  # the next episodes' first observations, reset in-step
