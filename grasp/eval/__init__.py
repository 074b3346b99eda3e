"""Evaluation: single-step retrieval recall, policy evaluation over the environment (EM, F1,
LLM-judge accuracy, paragraph and supporting-sentence recall, tool use, cost) and its tables."""
