# Two commands on a fresh machine:  make demo   (the main job)   and   make test   (the tests).
# Everything they need is installed here; nothing has to be installed by hand.
PYTHON ?= python3
VENV ?= .venv
SMDEBUG_VENV ?= .venv-smdebug
PY := $(VENV)/bin/python
# keras,tensorflow: the Keras hook's tests run on the torch and the TensorFlow backend, in this one venv;
# profiler: the system monitor (psutil, nvidia-ml-py)
EXTRAS ?= pytorch,profiler,xgboost,keras,tensorflow,infra,sagemaker,test,dev
PIP_QUIET ?= -q

.PHONY: all venv smdebug-venv smdebug-venv-torch cdk-cli test demo bench lint clean

all: test

# torch first, from the local CPU wheel: any range resolved later is then already satisfied.
$(VENV)/.stamp: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install $(PIP_QUIET) --upgrade pip
	$(PY) -m pip install $(PIP_QUIET) torch==2.13.0
	$(PY) -m pip install $(PIP_QUIET) -e '.[$(EXTRAS)]'
	touch $@

venv: $(VENV)/.stamp

# The real smdebug 1.0.34 in its own venv (its newest working combination), to prove compatibility.
$(SMDEBUG_VENV)/.stamp:
	$(PYTHON) -m venv $(SMDEBUG_VENV)
	$(SMDEBUG_VENV)/bin/pip install $(PIP_QUIET) numpy==2.2.6 protobuf==3.20.3 smdebug==1.0.34 requests pandas psutil
	touch $@

smdebug-venv: $(SMDEBUG_VENV)/.stamp

# smdebug's PyTorch hook, for the side-by-side hook benchmark only (tests do not need it).
smdebug-venv-torch: smdebug-venv
	$(SMDEBUG_VENV)/bin/pip install $(PIP_QUIET) torch==2.13.0

# The CDK CLI pinned by package.json + package-lock.json (npm's `latest` tag is a 3.0.0 that cannot read
# today's cloud assemblies); `npx cdk synth` then runs offline (see README, Auto-stop).
node_modules/.stamp: package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $@

cdk-cli: node_modules/.stamp

test: venv smdebug-venv cdk-cli
	SDK_EXT_REQUIRE_CDK_CLI=1 JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 SDK_EXT_REQUIRE_KERAS=1 \
	SDK_EXT_REQUIRE_SMDEBUG=1 SMDEBUG_PYTHON=$(CURDIR)/$(SMDEBUG_VENV)/bin/python $(PY) -m pytest

# A PyTorch job that goes wrong on purpose, run as a local SageMaker job: a rule catches it, the auto-stop
# handler stops it, the report is written (examples/pytorch_diverge/).
demo: venv
	$(PY) examples/pytorch_diverge/demo.py --jobs-dir demo-output

bench: venv smdebug-venv smdebug-venv-torch
	SMDEBUG_PYTHON=$(CURDIR)/$(SMDEBUG_VENV)/bin/python $(PY) -m tests.bench

# ruff (rule set in pyproject.toml) over everything tracked; mypy --strict over sdk_ext, lambda, infra, rules
lint: venv
	$(PY) -m ruff check .
	$(PY) -m mypy

clean:
	rm -rf $(VENV) $(SMDEBUG_VENV) demo-output .pytest_cache .hypothesis
