# polytri: `make help` lists the targets.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.polytri-installed
DOCS_STAMP := $(VENV)/.polytri-docs-installed
JOBS ?= 2

.PHONY: help demo test test-gpu fuzz bench polly lint docs clean

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

$(STAMP): setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "polytri: installing torch (the CPU build), triton, jax, flax, torchao, tensorflow-cpu, transformers and polytri into $(VENV): from a fresh clone"
	@echo "polytri: this takes a few minutes; pip reports each package as it goes"
	# The CPU build of torch: 2.13.0 is the version the machines carry as a local wheel.
	$(PY) -m pip install --progress-bar on torch==2.13.0
	# the jax, flax, quant, tensorflow and transformers extras (polytri.jax and flax models; torchao's PT2E quantization;
	# polytri.tf, with tensorflow-cpu; the model zoo's bert and gpt2), constrained to keep that torch
	echo torch==2.13.0 > $(VENV)/constraints.txt
	$(PY) -m pip install --progress-bar on -c $(VENV)/constraints.txt -e '.[test,jax,flax,quant,tensorflow,transformers]'
	touch $(STAMP)

demo: $(STAMP) ## install if needed, then run `polytri demo`
	$(VENV)/bin/polytri demo

test: $(STAMP) ## install if needed, then run the test suite (all but gpu and slow tests)
	$(PY) -m pytest -n $(JOBS) -q

test-gpu: $(STAMP) ## the tests that need a CUDA or ROCm GPU (every suite kernel on the device, tl.dot, the backend)
	$(PY) -m pytest -n $(JOBS) -q -m gpu

fuzz: $(STAMP) ## long property-based runs (marked slow)
	$(PY) -m pytest -n $(JOBS) -q -m slow

bench: $(STAMP) ## CPU benchmarks side by side
	$(VENV)/bin/polytri bench

polly: $(STAMP) ## install clang and Polly (apt-get, as root) for `polytri bench`'s polly column; check Polly runs
	$(PY) -m polytri.tools.polly --install

lint: $(STAMP) ## ruff (with complexity <= 10) over the package, tests and benchmarks; mypy over the package
	$(PY) -m pip install --quiet ruff mypy
	$(VENV)/bin/ruff check polytri tests benchmarks
	$(VENV)/bin/mypy polytri

$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP) ## the API reference from the docstrings (Sphinx, warnings are errors) into build/docs
	$(PY) -m sphinx -E -W --keep-going -q -b html docs/api build/docs
	@echo "API reference: build/docs/index.html"

clean: ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .hypothesis build *.egg-info
