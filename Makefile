# The project's commands. Each target sets up .venv first if needed.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# The real kuksa-client, apart from .venv (it pins its own grpcio-tools and cmd2):
# the KUKSA compatibility tests drive it from subprocesses.
KUKSA_VENV  := .venv-kuksa
KUKSA_STAMP := $(KUKSA_VENV)/.installed
# The compiled build, apart from .venv: the distributions installed (not editable) with
# vehicle_middleware.vstore, vehicle_middleware.ess (but its queues) and the streams'
# encoders compiled by mypyc (each one's setup.py, COMPILED; VMW_MYPYC=1).
COMPILED_VENV  := .venv-compiled
COMPILED_PY    := $(COMPILED_VENV)/bin/python
COMPILED_STAMP := $(COMPILED_VENV)/.installed

.PHONY: install fast kuksa-venv compiled-venv server-venv demo serve sim dashboard proto test lint typecheck unit unit-compiled bench bench-core bench-e2e bench-e2e-compiled bench-kuksa bench-kuksa-ingest bench-providers bench-provider-hints bench-spark bench-export bench-export-lag bench-metrics bench-cluster bench-wildcard bench-instructions bench-filters clean

# The distributions, one a top-level folder (docs/contributing.md), each editable, and
# the checks' own tools.
PARTS := proto vstore ess replica middleware sdk providers telemetry_export tools samples
DISTS := proto[grpc] vstore ess replica middleware sdk providers telemetry_export[spark] \
	tools samples[demo]
$(STAMP): $(foreach p,$(PARTS),$(p)/pyproject.toml) requirements-dev.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	VMW_MYPYC=0 $(PY) -m pip install --quiet --disable-pip-version-check \
		$(foreach d,$(DISTS),-e './$(d)') -r requirements-dev.txt \
		--config-settings editable_mode=compat
	@touch $(STAMP)

install: $(STAMP) fast

## The middleware's fast build where it can be built: .venv-compiled, with the cores and
## the streams' encoders compiled by mypyc (docs/compiled-build.md). Where it cannot (no
## C compiler, no Python headers), `make serve` and `make demo` run the pure build of
## .venv instead, and the middleware's log says which runs (`codecs: fast (compiled)`).
fast: $(STAMP)
	@$(MAKE) --no-print-directory $(COMPILED_STAMP) || echo "make: the compiled build \
	failed (above); the middleware runs pure Python from $(VENV)" >&2
# The Python that runs the middleware: the compiled build's where it was built.
RUN_PY = $$(test -f $(COMPILED_STAMP) && echo $(COMPILED_PY) || echo $(PY))

$(KUKSA_STAMP): tests/kuksa-client.txt
	@test -x $(KUKSA_VENV)/bin/python || $(PYTHON) -m venv $(KUKSA_VENV)
	$(KUKSA_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-r tests/kuksa-client.txt
	@touch $(KUKSA_STAMP)

## The kuksa-client virtualenv the KUKSA tests use (make test sets it up too).
kuksa-venv: $(KUKSA_STAMP)

# .venv-compiled: the ten distributions, not editable, without the Spark and demo
# extras (the compiled tests need neither), and the checks' tools; then vstore, ess and
# middleware again with their listed modules compiled, without build isolation so that
# mypyc (from mypy) sees the installed dependencies' types: three mypyc runs, a few
# minutes on two cores. Rebuilt when a source of a distribution changes.
COMPILED_DISTS := proto[grpc] vstore ess replica middleware sdk providers telemetry_export \
	tools samples
COMPILED_PARTS := vstore ess middleware
$(COMPILED_STAMP): $(shell find $(foreach p,$(PARTS),$(p)/vehicle_middleware) -type f \
		-not -path '*/__pycache__/*') $(foreach p,$(PARTS),$(p)/pyproject.toml) \
		$(foreach p,$(COMPILED_PARTS),$(p)/setup.py) build_support/compiled.py requirements-dev.txt
	@test -x $(COMPILED_PY) || $(PYTHON) -m venv $(COMPILED_VENV)
	VMW_MYPYC=0 $(COMPILED_PY) -m pip install --quiet --disable-pip-version-check \
		$(foreach d,$(COMPILED_DISTS),'./$(d)') -r requirements-dev.txt 'setuptools>=70.1'
	rm -rf $(foreach p,$(COMPILED_PARTS),$(p)/build)
	VMW_MYPYC=1 $(COMPILED_PY) -m pip install --quiet --disable-pip-version-check \
		--no-build-isolation --no-deps --force-reinstall $(addprefix ./,$(COMPILED_PARTS))
	@touch $(COMPILED_STAMP)

## The virtualenv of the compiled cores (make test sets it up too): docs/compiled-build.md.
compiled-venv: $(COMPILED_STAMP)

# .venv-server: the middleware alone, as an operator installs it (README.md, "Run the
# middleware"): the contract with gRPC, the three cores and the server, not editable,
# and their dependencies; no SDK, no Spark, no development tools. Rebuilt when a source
# of those distributions changes; build/ goes first so that no compiled module a
# compiled build left there slips into this pure one.
SERVER_VENV  := .venv-server
SERVER_STAMP := $(SERVER_VENV)/.installed
SERVER_DISTS := proto[grpc] vstore ess replica middleware
SERVER_PARTS := proto vstore ess replica middleware
$(SERVER_STAMP): $(shell find $(foreach p,$(SERVER_PARTS),$(p)/vehicle_middleware) -type f \
		-not -path '*/__pycache__/*') $(foreach p,$(SERVER_PARTS),$(p)/pyproject.toml)
	@test -x $(SERVER_VENV)/bin/python || $(PYTHON) -m venv $(SERVER_VENV)
	rm -rf $(foreach p,$(SERVER_PARTS),$(p)/build)
	VMW_MYPYC=0 $(SERVER_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		$(foreach d,$(SERVER_DISTS),'./$(d)')
	@touch $(SERVER_STAMP)

## The middleware alone in .venv-server, without the development environment:
## `.venv-server/bin/vehicle-middleware serve` runs it.
server-venv: $(SERVER_STAMP)

## The main job: a middleware, the simulated car, apps (one too slow), then the
## Spark gap analysis of the journal; the middleware is the compiled build where it was
## built. Under 2 minutes (about 7 with the installs); it prints progress as it goes.
## DURATION=60 runs longer.
DURATION ?= 20
demo: $(STAMP) fast
	@py=$(RUN_PY); set -x; $(PY) -m vehicle_middleware.demo --duration $(DURATION) \
		--out demo-out --middleware-python $$py

## Run the middleware on 127.0.0.1:50051 (Ctrl-C stops it), for contributors: from the
## development environment, the compiled build where it was built, else the pure one.
serve: $(STAMP) fast
	@py=$(RUN_PY); set -x; $$py -m vehicle_middleware.server serve

## The simulated car and a live dashboard, against `make serve` (each in its own terminal).
sim: $(STAMP)
	$(PY) -m vehicle_middleware.providers sim

dashboard: $(STAMP)
	$(PY) -m vehicle_middleware.apps dashboard

## Regenerate proto/vehicle_middleware/proto/ (the Python code of the gRPC contract) from proto/.
proto: $(STAMP)
	$(PY) proto/generate.py

## Everything CI checks: lint, types of the pure cores, every test; then the cores'
## tests again with the cores compiled. The virtualenvs are made side by side, and the
## compiled build runs beside the tests (most of them wait on servers and processes).
test:
	@$(MAKE) --no-print-directory -j2 $(STAMP) $(KUKSA_STAMP)
	@$(MAKE) --no-print-directory -j4 lint typecheck unit $(COMPILED_STAMP)
	@$(MAKE) --no-print-directory unit-compiled

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: $(STAMP)
	$(PY) -m mypy

# pytest-xdist: one worker per logical CPU (TEST_WORKERS=1 runs one). Many tests wait
# on servers, processes and timers, so two workers overlap their waits even on two
# cores. The tests that share a costly setup (three nodes, a Spark cluster, the SDK's
# install) run on one worker: tests/conftest.py, SHARED_SETUP.
TEST_WORKERS ?= logical
PYTEST_WORKERS := -n $(TEST_WORKERS)

unit: $(STAMP) $(KUKSA_STAMP)
	$(PY) -m pytest $(PYTEST_WORKERS)

# The tests of vehicle_middleware.vstore, vehicle_middleware.ess, vehicle_middleware.replica and the two encoders, and an
# end-to-end run through a server, in .venv-compiled; VMW_EXPECT_COMPILED=1 has
# tests/unit/test_compiled.py check that they import the compiled modules, not the
# sources. Deselected: what the pure cores do with ill-typed arguments (a bool or float
# as a key, a time, a version or a queue length), where mypyc's own argument checks
# answer first (docs/compiled-build.md, "What compiled code does differently").
COMPILED_TESTS := tests/unit/test_compiled.py tests/unit/test_vstore.py tests/unit/test_ess.py \
	tests/unit/test_ess_stats.py tests/unit/test_health.py tests/unit/test_state_machine.py \
	tests/unit/test_random_walk.py tests/unit/test_slow_apps.py tests/unit/test_metrics_parts.py \
	tests/unit/test_replica.py tests/unit/test_event_bytes.py tests/unit/test_wire.py \
	tests/unit/test_kuksa_entries.py tests/unit/test_kuksa_ingest.py tests/unit/test_scheduler.py \
	tests/unit/test_kuksa_response_cuts.py \
	tests/integration/test_ess_end_to_end.py tests/integration/test_kuksa_api.py \
	$(foreach t,test_a_key_that_is_neither_a_name_nor_an_id_is_a_type_error \
		test_times_and_versions_must_be_uint64_integers, \
		--deselect 'tests/unit/test_vstore.py::$(t)') \
	--deselect tests/unit/test_ess.py::test_queue_lengths_are_capped_and_validated
unit-compiled: $(COMPILED_STAMP)
	VMW_EXPECT_COMPILED=1 $(COMPILED_PY) -m pytest $(PYTEST_WORKERS) $(COMPILED_TESTS)

## Benchmarks (not part of `make test`): see BENCHMARKS.md.
bench: bench-core bench-e2e bench-e2e-compiled bench-kuksa bench-kuksa-ingest bench-providers bench-provider-hints bench-spark bench-export bench-export-lag bench-metrics bench-cluster bench-wildcard bench-instructions bench-filters

bench-core: $(STAMP)
	$(PY) -m bench.core

## Providers -> middleware -> 1/10/100 apps, beside the strongest bare grpc.aio
## ceiling and the raw limit; latency per event; journal drops vs full; a stuck
## app for a minute; a slow app's lag; each target met or not. About 4 minutes.
bench-e2e: $(STAMP)
	$(PY) -m bench.e2e --stuck-seconds 60 --lag-seconds 5 --journal-compare

## The same, the middleware run from .venv-compiled (its cores and encoders compiled).
bench-e2e-compiled: $(STAMP) $(COMPILED_STAMP)
	$(PY) -m bench.e2e --stuck-seconds 60 --lag-seconds 5 --journal-compare --compiled

## The KUKSA v2 API (OpenProviderStream -> Subscribe) beside the own API (Publish ->
## GetEvents) and the KUKSA databroker's published figures. About 80 s.
bench-kuksa: $(STAMP)
	$(PY) -m bench.kuksa

## The simulated car with and without the demand hint: updates published per second
## while an app watches no key, 10 keys, every key. About 40 s.
bench-provider-hints: $(STAMP)
	$(PY) -m bench.provider_hints

## A KUKSA provider's publish of floats read two ways, in both builds.
bench-kuksa-ingest: $(STAMP) $(COMPILED_STAMP)
	$(PY) -m bench.kuksa_ingest
	$(COMPILED_PY) -m bench.kuksa_ingest

## The server's own steps (publish -> store -> fan-out -> drain -> bytes, and through
## KUKSA) in machine instructions per event, by valgrind, in both builds. Minutes.
bench-instructions: $(STAMP) $(COMPILED_STAMP)
	$(PY) -m bench.instructions
	$(PY) -m bench.instructions --python $(COMPILED_PY)

## Subscription filters: their cost per write in the ESS core beside an unfiltered
## subscription and the drop rule; a 100 ms interval on a 1 kHz key through a real
## server (events/s, writes/event). About 30 s.
bench-filters: $(STAMP)
	$(PY) -m bench.filters

## Three nodes: replicated writes/s a -> an app on c beside one node, added latency at
## 1,000 writes/s, catch-up after a 30 s partition with 100,000 writes. About 2 minutes.
bench-cluster: $(STAMP)
	$(PY) -m bench.cluster

## The simulated car's and the replay reader's own cost, beside bare floors. Seconds.
bench-providers: $(STAMP)
	$(PY) -m bench.providers

## 1M and 10M synthetic journal records: ingest and analyze beside a scan floor and pandas.
bench-spark: $(STAMP)
	SPARK_LOCAL_IP=127.0.0.1 $(PY) -m bench.spark

## The journal leaving the car: Poll and Follow records/s from one middleware beside the
## journal writer's own rate, and the collector's into a landing area. About 20 s.
bench-export: $(STAMP)
	$(PY) -m bench.journal_export

## The export lag, a record written -> landed -> in the dataset (p50/p99/max), with the
## collector following and `ingest --stream --every 1` running: 500 updates/s for 30 s.
## About a minute.
bench-export-lag: $(STAMP)
	$(PY) -m bench.export_lag

clean:
	rm -rf $(VENV) $(KUKSA_VENV) $(COMPILED_VENV) $(SERVER_VENV) .venv-sdk .pytest_cache .mypy_cache .ruff_cache .hypothesis demo-out
	find $(PARTS) -name '*.egg-info' -prune -exec rm -rf {} +

## What the metrics cost: delivered events/s with nothing reading the figures, a
## Prometheus scraper every second, and `top` refreshing every second; 3 runs.
bench-metrics: $(STAMP)
	$(PY) -m bench.metrics_cost

## One huge KUKSA wildcard Get beside a bystander app: its wait, the RSS; 3 runs. About 30 s.
bench-wildcard: $(STAMP)
	$(PY) -m bench.wildcard_get --runs 3
