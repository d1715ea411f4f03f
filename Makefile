# envmgr — build, image, tests, benchmarks.
#   make            bin/envmgr
#   make image      the desktop guest image (cached; does nothing when inputs are unchanged)
#   make image-apps the apps guest image (Chromium, LibreOffice, GIMP, VLC, Thunderbird; cached)
#   make test       unit tests (CUnit) + integration tests on real QEMU guests
#   make asan       the same tests with AddressSanitizer + UBSan
#   make valgrind   unit tests and the CLI integration tests under valgrind
#   make bench      benchmark figures (printed, not pass/fail)
#   make fuzz       libFuzzer targets (clang)
#   make man        man pages from the commands' --help (help2man), in build/man
#   make install    PREFIX=/usr/local (and DESTDIR): binary, data files, man pages, bash completion
#   make uninstall  removes exactly what make install created

CC      ?= gcc
PKGS    := libvncclient libpng pixman-1 jansson libmicrohttpd libcurl fuse3
CSTD    := -std=c17 -D_GNU_SOURCE
WARN    := -Wall -Wextra -Wshadow -Wformat=2 -Wno-unused-parameter -Wstrict-prototypes
OPT     ?= -O2 -g
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null) $(shell libgcrypt-config --cflags 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null) $(shell libgcrypt-config --libs 2>/dev/null || echo -lgcrypt)
ROOT    := $(CURDIR)
# One version for envmgr, its man pages and the Python client (clients/python/pyproject.toml reads it).
VERSION := $(shell cat $(ROOT)/VERSION)
# No path of this checkout goes into envmgr: it finds its data files from where it runs
# (paths_data_dir). Only tests and benchmarks, which read the checkout's test data, get it.
DEFS    := -DENVMGR_VERSION='"$(VERSION)"'
TREE_DEFS := -DENVMGR_SOURCE_DIR='"$(ROOT)"'
CFLAGS  += $(CSTD) $(WARN) $(OPT) $(PKG_CFLAGS) $(DEFS) -I$(ROOT) -MMD -MP
LDLIBS  += $(PKG_LIBS) -lm -lpthread

BUILD   ?= build
BIN     ?= bin

LIB_SRC := $(filter-out envmgr/cli/%,$(wildcard envmgr/*/*.c)) $(wildcard recorder/*.c evaluator/*.c)
CLI_SRC := $(wildcard envmgr/cli/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
LIB     := $(BUILD)/libenvmgr.a

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TEST_HELPER_SRC := $(wildcard tests/unit/helpers/*.c)
TEST_HELPER_OBJ := $(TEST_HELPER_SRC:%.c=$(BUILD)/%.o)

.PHONY: all image image-apps test test-apps unit integration asan valgrind bench fuzz clean distclean demo registry layers man install uninstall metric-docs osworld-doc
all: $(BIN)/envmgr

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BIN)/envmgr: $(CLI_OBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(LIB) $(TEST_HELPER_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TREE_DEFS) -o $@ $< $(TEST_HELPER_OBJ) $(LIB) $(LDLIBS) -lcunit

# Fuzz targets rebuilt with gcc and a plain main(): `make test` replays their corpora.
FUZZ_REPLAY := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz-replay/%,$(wildcard tests/fuzz/fuzz_*.c))
$(BUILD)/fuzz-replay/%: tests/fuzz/%.c tests/fuzz/replay_main.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< tests/fuzz/replay_main.c $(LIB) $(LDLIBS)

# Small programs the shell tests use (PNG facts, a starved vCPU); built from the same library.
TOOLS := $(BUILD)/tools/pngtool $(BUILD)/tools/vstall $(FUZZ_REPLAY)
$(BUILD)/tools/%: tests/tools/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(TREE_DEFS) -o $@ $< $(LIB) $(LDLIBS)

image:
	$(MAKE) -C vm-images image

image-apps:
	$(MAKE) -C vm-images image-apps

# Man pages: generated from `envmgr --help` and `envmgr CMD --help`, so they follow the CLI.
man: $(BUILD)/man/envmgr.1
$(BUILD)/man/envmgr.1: $(BIN)/envmgr scripts/gen-man VERSION
	rm -rf $(BUILD)/man
	scripts/gen-man $(BIN)/envmgr $(VERSION) $(BUILD)/man

# envmgr finds its data files from bin/../share/envmgr (envmgr/base/paths.c): nothing here is
# compiled for one prefix, so the same build installs anywhere. See scripts/install.
PREFIX  ?= /usr/local
install: all man
	@scripts/install install "$(abspath $(DESTDIR)$(PREFIX))"

uninstall:
	@scripts/install uninstall "$(abspath $(DESTDIR)$(PREFIX))"

# The evaluator-script registry envmgr reads (metric names, families, options), from the scripts.
registry:
	/usr/bin/python3 -I evaluator/metrics/run.py --registry > evaluator/metrics/registry.json

# docs/task-format.md's list of every metric, from the C table and the registry (checked by
# tests/integration/test_evaluator_sandbox.sh).
metric-docs: $(BIN)/envmgr
	ENVMGR_BIN=$(ROOT)/$(BIN)/envmgr scripts/gen-metric-docs

# docs/osworld.md's tables of OSWorld's pieces, from envmgr's own tables (test_osworld_doc checks them).
osworld-doc: $(BIN)/envmgr
	scripts/gen-osworld-doc

unit: $(UNIT_BIN) $(BIN)/envmgr
	@tests/run-unit.sh $(UNIT_BIN)

# Each #include points to its own folder or a lower layer (docs/architecture.md).
layers:
	@scripts/check-layers

# The whole suite: unit tests, then integration tests on real guests (builds the image if needed; the
# apps image builds in the background meanwhile, for the apps smoke subset that runs last).
test: layers all $(UNIT_BIN) $(TOOLS) image
	@tests/run-all.sh $(UNIT_BIN)

# The apps image's tests in full (every tasks/apps task with the scripted and null agents, the smoke
# test of every app: ~45 min here). `make test` runs their smoke subset (one task per app).
test-apps: layers all $(TOOLS) image-apps
	@ENVMGR_APPS=1 ENVMGR_TESTS="apps_smoke apps_tasks apps_honest apps_image osworld_client_apps" tests/run-all.sh --integration-only

integration: all $(TOOLS) image
	@tests/run-all.sh --integration-only

# Sanitizer reports go to files (tests often silence stderr); run-all.sh fails on each one. An
# allocation too large for memory is a NULL (envmgr's fallible allocator handles it), not an abort.
asan:
	rm -rf $(ROOT)/build-asan/reports && mkdir -p $(ROOT)/build-asan/reports
	ASAN_OPTIONS=log_path=$(ROOT)/build-asan/reports/asan:detect_leaks=1:allocator_may_return_null=1 \
	UBSAN_OPTIONS=log_path=$(ROOT)/build-asan/reports/ubsan:print_stacktrace=1 \
	ENVMGR_SANITIZER_LOGS=$(ROOT)/build-asan/reports \
	$(MAKE) BUILD=build-asan BIN=build-asan/bin OPT="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer" \
	        LDFLAGS="-fsanitize=address,undefined" test-with-bin

# Unit tests and fuzz corpora under valgrind, then the CLI integration tests with envmgr itself
# under valgrind (tests/tools/valgrind-envmgr); every non-empty report fails the run.
valgrind: all $(UNIT_BIN) $(TOOLS) image
	@ENVMGR_VALGRIND=1 tests/run-unit.sh $(UNIT_BIN)
	@rm -rf build/valgrind && mkdir -p build/valgrind
	@ENVMGR_VALGRIND=1 ENVMGR_VALGRIND_LOGS=$(ROOT)/build/valgrind ENVMGR_SANITIZER_LOGS=$(ROOT)/build/valgrind \
	 ENVMGR_BIN=$(ROOT)/tests/tools/valgrind-envmgr ENVMGR_TESTS="$${ENVMGR_TESTS:-fuzz_corpus run replay}" \
	 tests/run-all.sh --integration-only

# Used by asan: the same driver, pointed at an instrumented binary.
test-with-bin: layers all $(UNIT_BIN) $(TOOLS) image
	@ENVMGR_BIN=$(ROOT)/$(BIN)/envmgr tests/run-all.sh $(UNIT_BIN)

bench: all $(TOOLS) $(BUILD)/bench/envbench $(BUILD)/bench/api_bench $(BUILD)/bench/sandbox_bench image
	@bench/run.sh

demo: all image
	@./demo

# libFuzzer targets: tests/fuzz/fuzz_*.c, each linked with the library built by clang.
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=build-fuzz/%)
FUZZ_SECONDS ?= 60
build-fuzz/%: tests/fuzz/%.c $(LIB_SRC)
	@mkdir -p build-fuzz
	clang $(CSTD) -g -O1 -fsanitize=fuzzer,address,undefined $(PKG_CFLAGS) $(DEFS) -I$(ROOT) -o $@ $< $(LIB_SRC) $(LDLIBS)
fuzz: $(FUZZ_BIN)
	@for f in $(FUZZ_BIN); do n=$$(basename $$f); mkdir -p build-fuzz/corpus/$$n; \
	  echo "== $$n ($(FUZZ_SECONDS) s)"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -artifact_prefix=build-fuzz/crash-$$n- \
	      build-fuzz/corpus/$$n tests/fuzz/corpus/$$n || exit 1; done

clean:
	rm -rf build build-asan build-fuzz bin

distclean: clean
	$(MAKE) -C vm-images clean

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d)
