"""The algorithms: pure functions over an explicit state pytree (see ``batchrl.agents.core``),
one folder per family. The object API that wraps them is ``batchrl.agent``; nothing here
imports it, nor ``batchrl.envs``."""
