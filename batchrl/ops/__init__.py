"""Small numerical building blocks shared by agents: returns, GAE, running statistics."""
from batchrl.ops.returns import discounted_returns, generalized_advantages, lambda_returns
from batchrl.ops.running_stats import RunningStats

__all__ = ["RunningStats", "discounted_returns", "generalized_advantages", "lambda_returns"]
