"""Experiments built on the evaluation protocol and training: the baseline table, ablations,
the k sweep and the robustness suite, with their configs (``grasp.experiments.config``)."""
