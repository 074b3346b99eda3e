"""Benchmarks and checks: the logic behind ``scripts/bench_*.py``, ``eval_fusion.py`` and
``gpu_check.py``, one module per thing measured (the scripts convert the config and call it).

- ``retrieval``: build speed, query latency, recall and memory of the retrieval layer by size;
- ``index_build``: time and memory per stage of the streaming index build, and storage costs;
- ``serve``: the retrieval service under load against in-process search;
- ``fusion``: hybrid-fusion variants' single-step recall, and the rule for the default;
- ``gpu``: the paper-scale GPU path (GRPO step, HF rollout, dense search) on random weights;
- ``environment``: tool calls per second, and the environment's share of a rollout's time;
- ``threads``: torch's thread count with and without a busy neighbour process;
- ``adapters``: generation with LoRA adapters merged into the weights against unmerged;
- ``train_step``: one experiment's GRPO step, part by part, against its raw model costs;
- ``measure``: timing helpers and recall against exact search, shared by the above;
- ``report``: the machine facts every report records, its tables' cells, where it is written.

Nothing is imported here, so that ``grasp.bench.gpu`` runs where only torch and transformers
are installed (no faiss, trl or datasets).
"""
