"""Evaluation: single-step retrieval recall, and (later) policy evaluation over the environment."""
