"""Rollouts: policies (generation backends) and the batched multi-turn engine."""
