# mtplx — build, run and test. `make run` and `make test` are the README's two commands; both
# install missing Debian packages first (scripts/deps.sh). Sources are found by wildcard: a new
# file under src/<layer>/ joins libmtplx, a new tests/unit/test_*.c becomes a test binary.

CC      ?= gcc
PKGS    := jansson libpcre2-8 libutf8proc libmicrohttpd libcurl
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# Baseline x86-64 code; SIMD kernels pick AVX2/AVX-512 at run time (src/kernels/cpu.c). Layers in
# dependency order; src/kernels is called only by src/backend/cpu (docs/architecture.md).
WARN    := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wno-missing-field-initializers
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c17 -D_GNU_SOURCE -pthread -fno-strict-aliasing $(WARN) $(PKG_CFLAGS) -MMD -MP
LDLIBS  := $(PKG_LIBS) -lpthread -lm
SANFLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

JOBS    ?= $(shell nproc 2>/dev/null || echo 2)

LAYERS  := base kernels backend backend/cpu model model/families tokenizer chat grammar engine server hub
# The browser UI (web/) is compiled into the library as one generated C file (scripts/embed-web.sh;
# src/server/web.h): `mtplx serve` needs no files at run time and the build needs no npm.
WEB_FILES := $(sort $(wildcard web/*))
WEB_GEN  := build/gen/web_files.c
LIB_SRC := $(foreach l,$(LAYERS),$(wildcard src/$(l)/*.c)) $(WEB_GEN)
CLI_SRC := $(wildcard src/cli/*.c)
TEST_SRC := $(wildcard tests/unit/test_*.c)

LIB_OBJ  := $(LIB_SRC:%.c=build/obj/%.o)

# `make CUDA=1`: the same build/mtplx with the CUDA backend (src/backend/cuda/*.cu, CUDA C++ by nvcc
# for sm_90; docs/architecture.md, "The CUDA backend"). Plain C everywhere else; without CUDA=1
# nothing here changes. The variant is recorded in build/.variant so that switching between the two
# rebuilds backend.o (the only C file that knows) and relinks.
VARIANT := $(if $(filter 1,$(CUDA)),cuda,cpu)
$(shell mkdir -p build; [ "$$(cat build/.variant 2>/dev/null)" = "$(VARIANT)" ] || echo $(VARIANT) > build/.variant)
# plain `make` builds `all` (the CLI, the embedded model, the unit tests), not the first rule below
.DEFAULT_GOAL := all
NVCC      ?= $(firstword $(shell command -v nvcc 2>/dev/null) /usr/local/cuda/bin/nvcc)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_ARCH ?= sm_90
NVCCFLAGS ?= -O3 -std=c++17 -arch=$(CUDA_ARCH) -lineinfo -Xcompiler -fno-strict-aliasing,-pthread,-Wall -MMD -MP
ifeq ($(VARIANT),cuda)
CU_OBJ    := $(patsubst %.cu,build/obj/%.o,$(wildcard src/backend/cuda/*.cu))
LIB_OBJ   += $(CU_OBJ)
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lstdc++
build/obj/src/backend/backend.o: CFLAGS += -DMTPLX_CUDA
endif
build/obj/src/backend/backend.o: build/.variant
# `mtplx --version` names the commit the binary was built from (src/cli/version.c): `git describe
# --always --dirty` here, "unknown" outside a git checkout. build/.commit is rewritten only when that
# changes, so a new commit recompiles version.c alone and relinks the CLI.
BUILD_COMMIT := $(shell git describe --always --dirty 2>/dev/null | tr -cd 'A-Za-z0-9._-' | grep . || echo unknown)
$(shell [ "$$(cat build/.commit 2>/dev/null)" = "$(BUILD_COMMIT)" ] || echo $(BUILD_COMMIT) > build/.commit)
VERSION_OBJ := $(foreach d,obj asan/obj tsan/obj,build/$(d)/src/cli/version.o)
$(VERSION_OBJ): build/.commit
$(VERSION_OBJ): CFLAGS += -DMTPLX_BUILD_COMMIT='"$(BUILD_COMMIT)"'
build/obj/src/backend/cuda/%.o: src/backend/cuda/%.cu Makefile
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@
CLI_OBJ  := $(CLI_SRC:%.c=build/obj/%.o)
TSANFLAGS := -O1 -g -fsanitize=thread -fno-omit-frame-pointer
TSAN_LIB_OBJ := $(LIB_SRC:%.c=build/tsan/obj/%.o)
TSAN_CLI_OBJ := $(CLI_SRC:%.c=build/tsan/obj/%.o)
ASAN_LIB_OBJ := $(LIB_SRC:%.c=build/asan/obj/%.o)
ASAN_CLI_OBJ := $(CLI_SRC:%.c=build/asan/obj/%.o)
TESTS      := $(TEST_SRC:tests/unit/%.c=build/tests/%)
ASAN_TESTS := $(TEST_SRC:tests/unit/%.c=build/asan/tests/%)

.PHONY: all deps run test check unit asan-unit clean fuzz model mutation-check fault tsan-check
all: model build/mtplx $(TESTS)

# The embedded model's weight shards, tokenizer.json and val_code.txt are committed xz-compressed
# (33 MB instead of 47 MB, so the tracked tree stays under the 56 MiB that the GPU machine accepts:
# scripts/check-size.sh); make unpacks them next to the .xz once. xz checks its own CRC64 while
# unpacking. The shards are packed with `xz -T1 --lzma2=preset=9e,lc=3,lp=1,pb=1` (bf16 data: 2-byte
# positions; 5% smaller than -9, 1.6 MiB of the size limit); plain `xz -dc` reads them.
MODEL_XZ := $(wildcard models/*/*.safetensors.xz models/*/*.json.xz models/*/*.txt.xz)
MODEL_BIN := $(MODEL_XZ:%.xz=%)
model: $(MODEL_BIN)
models/%.safetensors: models/%.safetensors.xz
	xz -dc $< > $@.tmp && mv $@.tmp $@
models/%.json: models/%.json.xz
	xz -dc $< > $@.tmp && mv $@.tmp $@
models/%.txt: models/%.txt.xz
	xz -dc $< > $@.tmp && mv $@.tmp $@

deps:
	@bash scripts/deps.sh

$(WEB_GEN): $(WEB_FILES) web scripts/embed-web.sh   # web: its mtime changes when a file is added or removed
	@mkdir -p $(dir $@)
	bash scripts/embed-web.sh $@ $(WEB_FILES)

# The SIMD kernels build at -O3 (src/backend/ and everything else at -O2: the CPU backend's glue
# was measured at -O2, docs/architecture.md): its complete unrolling keeps their small fixed-size accumulator
# arrays in registers, where -O2 (GCC 12) left some in stack memory — attention ran 2-2.6x slower
# (bench/kernels.md). Floating-point semantics are the same at both levels (no -ffast-math).
build/obj/src/kernels/%.o: OPT_KERNELS := -O3
# Flags live here: a changed Makefile rebuilds the objects (an old -O2 kernel object would stay).
$(LIB_OBJ) $(CLI_OBJ) $(ASAN_LIB_OBJ) $(ASAN_CLI_OBJ) $(TSAN_LIB_OBJ) $(TSAN_CLI_OBJ): Makefile

build/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(OPT_KERNELS) -c $< -o $@

build/asan/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -O2 -O3,$(CFLAGS)) $(SANFLAGS) -c $< -o $@

# The ThreadSanitizer build: the sequence pool, the scheduler, the prefix cache and the server share
# state across threads. `make test` runs TSAN_UNITS under it (the pool's threaded test found the
# race behind a CI failure, README "Testing"); `make tsan-check` runs the slower ones too (~5 min
# for test_sched and test_prefix_cache) and a serve load with cancels (tests/tsan.sh).
TSAN_UNITS := test_batch test_threadpool
TSAN_TESTS := $(TSAN_UNITS:%=build/tsan/tests/%)
build/tsan/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -O2 -O3,$(CFLAGS)) $(TSANFLAGS) -c $< -o $@

build/tsan/libmtplx.a: $(TSAN_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

build/tsan/mtplx: $(TSAN_CLI_OBJ) build/tsan/libmtplx.a
	$(CC) $(TSANFLAGS) -pthread -o $@ $(TSAN_CLI_OBJ) build/tsan/libmtplx.a $(LDLIBS)

build/tsan/tests/%: tests/unit/%.c build/tsan/libmtplx.a tests/unit/test.h
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -O2 -O3,$(CFLAGS)) $(TSANFLAGS) -o $@ $< build/tsan/libmtplx.a $(LDLIBS)

build/libmtplx.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

build/asan/libmtplx.a: $(ASAN_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

build/mtplx: $(CLI_OBJ) build/libmtplx.a build/.variant
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) build/libmtplx.a $(LDLIBS) $(CUDA_LIBS)

# The sanitizer build of the CLI: integration tests of error paths run it.
build/asan/mtplx: $(ASAN_CLI_OBJ) build/asan/libmtplx.a
	$(CC) $(SANFLAGS) -pthread -o $@ $(ASAN_CLI_OBJ) build/asan/libmtplx.a $(LDLIBS)

build/tests/%: tests/unit/%.c build/libmtplx.a tests/unit/test.h build/.variant
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< build/libmtplx.a $(LDLIBS) $(CUDA_LIBS)

build/asan/tests/%: tests/unit/%.c build/asan/libmtplx.a tests/unit/test.h
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -O2 -O3,$(CFLAGS)) $(SANFLAGS) -o $@ $< build/asan/libmtplx.a $(LDLIBS)

# The fault-injection build (src/base/fault.h): ASan/UBSan plus -DMTPLX_FAULT, and the link routes
# every allocation call of mtplx code through src/base/fault.c's counting wrappers.
# tests/fault/sweep.py runs scenarios with the n-th allocation or I/O failing.
# -DMTPLX_FAULT changes only the files that include fault.h (its hooks compile to nothing without it;
# nothing else reads the macro), so only those are compiled again here; every other object is the
# ASan/UBSan build's, made with the same flags. A header that includes fault.h makes its includers
# fault files too.
FAULT_HDRS := $(shell grep -l 'fault\.h' $(wildcard src/*/*.h src/*/*/*.h) 2>/dev/null | grep -v 'src/base/fault\.h')
FAULT_SRC := $(shell grep -lE 'fault\.h$(foreach h,$(FAULT_HDRS),|$(notdir $(h)))' $(filter src/%,$(LIB_SRC) $(CLI_SRC)) 2>/dev/null)
fault_obj = $(foreach f,$(1),$(if $(filter $(f),$(FAULT_SRC)),build/fault/obj/$(f:.c=.o),build/asan/obj/$(f:.c=.o)))
FAULT_LIB_OBJ := $(call fault_obj,$(LIB_SRC))
FAULT_CLI_OBJ := $(call fault_obj,$(CLI_SRC))
FAULT_WRAP := $(foreach f,malloc calloc realloc strdup strndup aligned_alloc posix_memalign,-Wl,--wrap=$(f))
$(FAULT_LIB_OBJ) $(FAULT_CLI_OBJ): Makefile
fault: build/fault/mtplx
build/fault/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -O2 -O3,$(CFLAGS)) $(SANFLAGS) -DMTPLX_FAULT -c $< -o $@
build/fault/libmtplx.a: $(FAULT_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
build/fault/mtplx: $(FAULT_CLI_OBJ) build/fault/libmtplx.a
	$(CC) $(SANFLAGS) -pthread $(FAULT_WRAP) -o $@ $(FAULT_CLI_OBJ) build/fault/libmtplx.a $(LDLIBS)

# README command 1: build and generate text with the embedded model.
RUN_ARGS ?= --prompt 'def fibonacci(n):' --max-tokens 64 --seed 1
run: deps
	@$(MAKE) --no-print-directory -j$(JOBS) model build/mtplx
	./build/mtplx run $(RUN_ARGS)

# README command 2: build everything and run the whole suite (unit tests, the same under
# ASan/UBSan, the AArch64 build of the unit tests under qemu, then tests/integration/*.sh).
test:
	@MTPLX_TEST_DEPS=1 bash scripts/deps.sh
	@MTPLX_DEPS_MET=test bash scripts/npm-deps.sh
	@$(MAKE) --no-print-directory -j$(JOBS) all build/asan/mtplx build/fault/mtplx $(ASAN_TESTS) $(TSAN_TESTS) fuzz arm64
	@MTPLX_DEPS_MET=test TSAN_UNITS="$(TSAN_UNITS)" bash tests/run.sh

tsan-check: model
	@$(MAKE) --no-print-directory -j$(JOBS) build/tsan/mtplx $(TSAN_TESTS) build/tsan/tests/test_sched build/tsan/tests/test_prefix_cache
	@bash tests/tsan.sh

# Plant each deliberate bug of tests/mutations/*.patch in a copy of the tree; fails unless the tests
# catch every one (tests/mutations/README.md). Not part of `make test`: it rebuilds per mutation.
mutation-check:
	@bash tests/mutations/run.sh

# libFuzzer harnesses: tests/fuzz/fuzz_<name>.c, built with clang against the library sources.
# `make fuzz` builds them; tests/run.sh replays each one's committed corpus (tests/fuzz/corpus/<name>/,
# every file once, deterministic); `bash bench/fuzz.sh [SECONDS]` runs the random campaigns.
FUZZ_SRC  := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRC:tests/fuzz/%.c=build/fuzz/%)
FUZZ_CFLAGS := -O1 -g -std=c17 -D_GNU_SOURCE -pthread -fsanitize=address,undefined $(PKG_CFLAGS) -MMD -MP
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=build/fuzz/obj/%.o)
fuzz: $(FUZZ_BINS)
# The library is compiled once with coverage instrumentation (fuzzer-no-link), then each harness
# links against it. The SIMD kernels at -O0 (same sanitizers and coverage): at -O1 clang 14 unrolls
# their `GCC unroll 16` tile loops and then spends minutes on the sanitizer checks of the unrolled
# code (attention.c alone: over 3 minutes of CPU, the tail of every `make test` build; 3 s at -O0).
# Only fuzz_model_config reaches them, on tiny shapes.
build/fuzz/obj/src/kernels/%.o: FUZZ_OPT := -O0
build/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) $(FUZZ_OPT) -fsanitize=fuzzer-no-link -c $< -o $@
build/fuzz/libmtplx.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
build/fuzz/%: tests/fuzz/%.c build/fuzz/libmtplx.a
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< build/fuzz/libmtplx.a $(LDLIBS)
# The same harnesses with clang's source-based coverage instead of the sanitizers, for the llvm-cov
# report of the fuzzed files over the committed corpora (tests/fuzz/coverage.sh; bench/fuzz.md).
COV_CFLAGS := -O1 -g -std=c17 -D_GNU_SOURCE -pthread -fprofile-instr-generate -fcoverage-mapping $(PKG_CFLAGS) -MMD -MP
COV_LIB_OBJ := $(LIB_SRC:%.c=build/cov/obj/%.o)
build/cov/obj/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(COV_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
build/cov/libmtplx.a: $(COV_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
build/cov/fuzz_%: tests/fuzz/fuzz_%.c build/cov/libmtplx.a
	clang $(COV_CFLAGS) -fsanitize=fuzzer -o $@ $< build/cov/libmtplx.a $(LDLIBS)

clean:
	rm -rf build

-include $(FAULT_LIB_OBJ:.o=.d) $(FAULT_CLI_OBJ:.o=.d) $(FUZZ_LIB_OBJ:.o=.d) $(COV_LIB_OBJ:.o=.d) $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(ASAN_LIB_OBJ:.o=.d) $(ASAN_CLI_OBJ:.o=.d)
# unit tests too (-MMD writes build/tests/test_x.d): a change to fwd_util.h or cmp.h rebuilds them
-include $(TESTS:=.d) $(ASAN_TESTS:=.d)

# ---- AArch64: the library and the unit tests cross-compiled with Debian's gcc-aarch64-linux-gnu
# against the arm64 -dev packages (multiarch), run under qemu-user by tests/arm64.sh: `make
# test-arm64` (tests/run.sh runs it as one check). ARM64 speed cannot be measured here (README). The
# NEON kernels are chosen at run time (src/kernels/cpu.c), so one build serves every ARMv8-A CPU.
ARM_CC   ?= aarch64-linux-gnu-gcc
ARM_PKGCONFIG := PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig pkg-config
# evaluated once, on first use (a plain `make` never asks the arm64 pkg-config)
ARM_PKG_CFLAGS = $(eval ARM_PKG_CFLAGS := $(shell $(ARM_PKGCONFIG) --cflags $(PKGS) 2>/dev/null))$(ARM_PKG_CFLAGS)
ARM_PKG_LIBS = $(eval ARM_PKG_LIBS := $(shell $(ARM_PKGCONFIG) --libs $(PKGS) 2>/dev/null))$(ARM_PKG_LIBS)
ARM_CFLAGS = -O2 -g -std=c17 -D_GNU_SOURCE -pthread -fno-strict-aliasing $(WARN) $(ARM_PKG_CFLAGS) -MMD -MP
ARM_LIB_OBJ := $(LIB_SRC:%.c=build/arm64/obj/%.o)
ARM_TESTS   := $(TEST_SRC:tests/unit/%.c=build/arm64/tests/%)

.PHONY: arm64 test-arm64
arm64: model $(ARM_TESTS)

build/arm64/obj/src/kernels/%.o: ARM_OPT := -O3
$(ARM_LIB_OBJ): Makefile
build/arm64/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(ARM_CC) $(ARM_CFLAGS) $(ARM_OPT) -c $< -o $@

build/arm64/libmtplx.a: $(ARM_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

build/arm64/tests/%: tests/unit/%.c build/arm64/libmtplx.a tests/unit/test.h
	@mkdir -p $(dir $@)
	$(ARM_CC) $(ARM_CFLAGS) -o $@ $< build/arm64/libmtplx.a $(ARM_PKG_LIBS) -lpthread -lm

test-arm64:
	@MTPLX_ARM64_DEPS=1 bash scripts/deps.sh
	@$(MAKE) --no-print-directory -j$(JOBS) arm64
	@bash tests/arm64.sh

-include $(ARM_LIB_OBJ:.o=.d) $(ARM_TESTS:=.d)
