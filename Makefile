# The two commands a new machine needs: `make demo` and `make test`.
SHELL := /bin/bash
PY := .venv/bin/python

export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
export BACKFILL_LANDING_DIR ?= $(CURDIR)/data/landing
export BACKFILL_LAKE_DIR ?= $(CURDIR)/data/lake

.PHONY: setup class-archive demo test test-fast test-order lint screenshots ui status clean
setup:
	@./scripts/bootstrap.sh
	@$(PY) -m backfill_assets.cli.instance dagster.yaml "$(DAGSTER_HOME)"

# Spark's classes archived for the driver JVM (.jars/spark-classes.jsa): each session then starts in
# about half the time, for some 30 s of building once. It pays where many sessions start (the
# tests, `make ui`'s runs), not in `make demo`, which starts one.
class-archive: setup
	@$(PY) -m backfill_assets.spark.class_archive

demo: setup  ## generate the 60 days ending yesterday and backfill them through Dagster
	$(PY) -m backfill_assets.cli demo

ORDER_TESTS := backfill_assets_tests/defs/test_downstream.py \
	backfill_assets_tests/corrections/test_corrections.py \
	backfill_assets_tests/enrichment/test_client.py
test: class-archive  ## the whole suite: transforms, lake, Dagster, end to end; fails on a skip not allowed
	@./scripts/test-deps.sh
	@$(PY) -m backfill_assets.spark.delta_jars --s3a  # the suite runs delta-spark on S3 too
	$(PY) -m pytest --skip-allowlist=.ci/skip-allowlist.txt $(ORDER_TESTS:%=--reverse-module=%) $(PYTEST_ARGS)

# Two pytest workers, a module each at a time (pytest-xdist): most of these tests wait on small Spark
# jobs, locks and S3 round trips rather than compute, so two of them share the 2-core box well.
# Under -n, the workers are the side lane; the lake's delta-spark cases (slow) fail there, asking
# for a run without -n.
test-fast: class-archive  ## the inner loop: every test that is neither `slow` nor `e2e`, in two workers; no test-deps.sh (chromium, postgresql)
	$(PY) -m pytest -m "not slow and not e2e" -n 2 --dist loadfile $(PYTEST_ARGS)

test-order: class-archive  ## the modules that share expensive state, each run last test first: no test relies on one before it
	$(PY) -m pytest --reverse-order $(ORDER_TESTS) $(PYTEST_ARGS)

lint: setup  ## the type checker, ruff's rules, the format check and Dagster's definitions check
	.venv/bin/mypy
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	VIRTUAL_ENV=$(CURDIR)/.venv .venv/bin/dg check defs

screenshots: class-archive  ## refresh README's pictures in docs/img/: the browser tests copy them from their runs
	BACKFILL_E2E_DOCS_IMG=$(CURDIR)/docs/img $(PY) -m pytest backfill_assets_tests/e2e -q

UI_PORT ?= 3000
ui: class-archive  ## the Dagster webserver and daemon on http://127.0.0.1:$(UI_PORT) (after `make demo`)
	.venv/bin/dagster dev -h 127.0.0.1 -p $(UI_PORT) -w workspace.yaml

status: setup
	$(PY) -m backfill_assets.cli status

clean:
	rm -rf data .dagster_home
