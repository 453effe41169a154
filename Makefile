# node-flow — the two commands a newcomer needs:
#
#   make run    install what is missing, build, start a local PostgreSQL 18,
#               migrate it and serve on 127.0.0.1:8080 (NODEFLOW_LISTEN)
#   make test   the same set-up, then every test in a sanitizer build
#   make fuzz   every libFuzzer target for 10 million executions (clang)
#   make chaos  the fault harness: minutes of crashes on three replicas, then
#               its checks (docs/reliability.md)
#
# Plain `make` builds build/nodeflow.  Set NODEFLOW_DATABASE_URL to use your
# own PostgreSQL 18 instead of the local one.

BUILD      ?= build
TEST_BUILD ?= build-test
FUZZ_BUILD ?= build-fuzz
BOOTSTRAP  := tools/bootstrap.sh

.PHONY: all run test fuzz deps build build-test check-format format clean \
	db-start db-stop

all: build

# The toolchain first: a fresh machine may have no meson yet.
deps:
	@$(BOOTSTRAP) deps

$(BUILD)/build.ninja:
	@command -v meson >/dev/null 2>&1 || $(BOOTSTRAP) deps
	meson setup $(BUILD) --buildtype=debugoptimized

build: $(BUILD)/build.ninja
	@ninja -C $(BUILD) nodeflow

$(TEST_BUILD)/build.ninja:
	@command -v meson >/dev/null 2>&1 || $(BOOTSTRAP) deps
	meson setup $(TEST_BUILD) --buildtype=debug \
		-Db_sanitize=address,undefined -Db_lundef=false

build-test: $(TEST_BUILD)/build.ninja
	@ninja -C $(TEST_BUILD)

run:
	@$(BOOTSTRAP) all
	@$(MAKE) --no-print-directory build
	@eval "$$($(BOOTSTRAP) env)" && \
		$(BUILD)/nodeflow migrate && \
		exec $(BUILD)/nodeflow serve

test:
	@$(BOOTSTRAP) all
	@$(MAKE) --no-print-directory build-test
	@tests/run.sh $(TEST_BUILD)

# Every fuzz target for 10 million executions (clang; tools/fuzz.sh).
fuzz:
	@command -v clang >/dev/null 2>&1 || $(BOOTSTRAP) deps
	@tools/fuzz.sh build $(FUZZ_BUILD)
	@tools/fuzz.sh all $(FUZZ_BUILD) -runs=10000000

# The fault harness on the optimised build: replica kills, PostgreSQL
# restarts and worker kills on a PostgreSQL of its own (tools/chaos/chaos.py).
.PHONY: chaos
chaos:
	@$(BOOTSTRAP) deps
	@$(MAKE) --no-print-directory build
	@NODEFLOW_BIN=$(BUILD)/nodeflow python3 tools/chaos/chaos.py

db-start:
	@$(BOOTSTRAP) pg start

db-stop:
	@$(BOOTSTRAP) pg stop

check-format:
	@tools/format.sh --check

format:
	@tools/format.sh

clean:
	rm -rf $(BUILD) $(TEST_BUILD) $(TEST_BUILD)-fuzz $(FUZZ_BUILD)
