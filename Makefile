# The two commands a new machine needs: `make demo` and `make test`.
SHELL := /bin/bash
PY := .venv/bin/python

export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
export BACKFILL_LANDING_DIR ?= $(CURDIR)/data/landing
export BACKFILL_LAKE_DIR ?= $(CURDIR)/data/lake

.PHONY: setup demo test ui status clean
setup:
	@./scripts/bootstrap.sh
	@$(PY) -m backfill_assets.dagster_instance dagster.yaml "$(DAGSTER_HOME)"

demo: setup  ## generate 60 days of orders and backfill them through Dagster
	$(PY) -m backfill_assets.cli demo

test: setup  ## the whole suite: transforms, lake, Dagster, end to end
	$(PY) -m pytest $(PYTEST_ARGS)

UI_PORT ?= 3000
ui: setup  ## the Dagster webserver and daemon on http://127.0.0.1:$(UI_PORT) (after `make demo`)
	.venv/bin/dagster dev -h 127.0.0.1 -p $(UI_PORT) -w workspace.yaml

status: setup
	$(PY) -m backfill_assets.cli status

clean:
	rm -rf data .dagster_home
