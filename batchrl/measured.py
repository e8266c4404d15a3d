"""The numbers measured on one machine that steer how batchrl compiles and splits its work.

Each was measured on the 2-core CPU batchrl is developed on (x86-64, no GPU, 2026-11 and
2026-12). None changes what a run computes, only how long it takes: a wrong value on another
machine costs time, never a result. Each entry says what it decides, what was measured, and
how to measure it again; a value found better on another machine belongs here, with its
measurement, not at the place that uses it.

This module imports nothing, so that every layer of batchrl may read it.
"""

# --- Compilation (``batchrl.programs``, ``batchrl.train.build``) ----------------------------

# A host-env run of this many steps or more compiles its training chunk as a "long" program
# (XLA's fusion emitters): sac_mujoco's chunk runs ~10% faster a step (paired runs: median
# 8.4 against 9.5 ms) and compiles 0.4-2 s longer (SAC, TD3), which a run of minutes repays.
# Measure again: ``python benchmarks/sac_step.py --skip-peers`` with
# ``BATCHRL_FAST_COMPILE`` unset, once with ``build.chunk_kind`` returning "long" and once
# "loop"; the break-even is the compile difference over the per-step gain.
LONG_HOST_STEPS = 50_000

# An optimized evaluation program repays its compile time from about this many env steps
# (per env) over a run's evaluations. Measured on fused CartPole (32 envs): a step of the
# evaluation unoptimized 0.13 ms, optimized 0.04 ms; compiling optimized takes ~0.7 s longer,
# mostly hidden (it compiles ahead on another core, and a program compiling over a second is
# kept in the compilation cache): ``pqn_cartpole_fused``'s 11 evaluations (~5,000 steps)
# 0.7 -> 0.2 s, its whole process 7.1 -> 6.2 s. Measure again: time
# ``batchrl train --config pqn_cartpole_fused`` whole with ``BATCHRL_COMPILATION_CACHE=0``,
# with ``build.eval_kind`` returning "loop" and then "once".
LOOP_EVAL_STEPS = 4_000

# A program that compiles faster than this is not worth a read from JAX's persistent cache
# (``batchrl.compilation_cache``): below it, reading and checking the entry costs about what
# compiling does. Lowering it to 0.2 s gave the same wall time for four test modules that
# compile the same programs many times (291 s against 293 s, 2026-12-07).
MIN_COMPILE_SECONDS = 1.0

# --- PPO's update on the host (``ppo_atari``: ``batchrl.train.host_update``) --------------

# Frames per call of a network on the host: the activations of a smaller call stay in the
# caches, and one thread per core runs the calls side by side. Measured on the Nature CNN:
# values of 1024 frames 0.50 s in one call, 0.24 s as 4 x 256 over 2 threads; the gradient
# of a 256-frame minibatch 350 ms in one call, 217 ms as 2 x 128 over 2 threads, 170 ms as
# 4 x 64, 198 ms as 8 x 32. Measure again: ``python benchmarks/atari.py --only ours`` once
# per candidate value.
VALUE_CHUNK_FRAMES = 256
GRADIENT_SHARE_FRAMES = 64

# Above this many parameters the optimizer steps per leaf instead of on one flat vector:
# the copies into and out of the vector then cost more than the kernels they save. Measured
# on the 'same'-padded Nature CNN (4.0M parameters): 63 ms a step flat against 9 ms per leaf;
# on small networks the flat step's few kernels compile in a third less time. Measure again:
# ``python benchmarks/atari.py --only ours`` with this value above and below the network's
# size.
FLAT_STEP_MAX_PARAMS = 1_000_000

# --- The object API (``batchrl.agent``) ----------------------------------------------------

# A single float-vector state of at most this many elements takes ``act``'s one-stream path
# (``Streams.act_one``), which checks it element by element in Python, about 10 ns an
# element; larger states take the general path. Measure again: ``python
# benchmarks/agent_api.py --only user`` on envs whose states hold 32, 64 and 128 floats.
ONE_STREAM_SIZE = 64
