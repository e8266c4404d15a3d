"""Quick start: PPO learns CartPole (TensorForce's quick start, written for batchrl).

    python examples/quickstart.py            # up to 3000 episodes; stops once solved
    python examples/quickstart.py 50         # a shorter try: at most 50 episodes

The same settings as the TensorForce original (batch of 4096 timesteps, GAE lambda 0.97,
learning rate 1e-3, entropy penalty 0.01, 5 epochs of minibatches of 512, clipping 0.2, two
dense layers of 32), episodes cut at 200 timesteps. CartPole counts as solved when the mean
reward of the last 100 episodes reaches 195: the callback then stops the run.
"""
from __future__ import annotations

import sys

import numpy as np

from batchrl import Agent, Runner

SOLVED = 195.0


def main(episodes: int = 3000) -> float:
  agent = Agent.create(
      agent="ppo", environment="CartPole-v1",
      batch_size=4096, gae_lambda=0.97, learning_rate=1e-3, entropy_penalty=0.01, epochs=5,
      optimizer_batch_size=512, loss_clipping=0.2,
      network=[dict(type="dense", size=32), dict(type="dense", size=32)], seed=0)
  runner = Runner(agent=agent, environment="CartPole-v1", seed=0)

  # Called after every episode with the runner; returning False stops the run.
  def episode_finished(r):
    mean = np.mean(r.episode_rewards[-100:])
    if r.episode % 100 == 0:
      print(f"Finished episode {r.episode} after {r.timestep} timesteps "
            f"(reward: {r.episode_rewards[-1]}, mean of the last 100: {mean:.1f})")
    if r.episode >= 100 and mean >= SOLVED:
      print(f"Solved after {r.episode} episodes ({r.timestep} timesteps): mean reward "
            f"{mean:.1f} over the last 100 episodes")
      return False
    return True

  runner.run(episodes=episodes, max_timesteps=200, episode_finished=episode_finished)
  mean = float(np.mean(runner.episode_rewards[-100:]))
  print(f"Learning finished. Total episodes: {runner.episode}. "
        f"Average reward of last 100 episodes: {mean:.1f}.")
  runner.close()
  agent.close()  # the runner leaves the agent open: agent.save(...) would work here
  return mean


if __name__ == "__main__":
  main(int(sys.argv[1]) if len(sys.argv) > 1 else 3000)
