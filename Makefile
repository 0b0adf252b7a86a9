# Two entry points for a fresh machine; everything else is 'invoke' (see README).
VENV ?= .venv
PYTHON ?= python3

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	touch $@

.PHONY: install demo test test-unit
install: $(VENV)/.installed  ## create .venv with nsyskit and its test dependencies

demo: $(VENV)/.installed  ## setup, build, run the example under nsys, analyze (local-cpu profile)
	$(VENV)/bin/invoke demo

test: $(VENV)/.installed  ## lint and run the whole test suite against real components
	$(VENV)/bin/invoke test

test-unit: $(VENV)/.installed  ## lint and run the unit tests only (no engine, cluster or registry needed)
	$(VENV)/bin/invoke test --unit
