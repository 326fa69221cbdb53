# maskd build. `make` builds build/maskd; `make test` runs every test (plain and
# under ASan+UBSan); `make run` sets up, builds and starts maskd.
#
# Layers: engine/ (numeric core) <- store/ (SQLite) <- server/ (the maskd program).
# Each layer is a static library; tests link all of them.

ifeq ($(origin CC),default)
CC = gcc
endif
OPT     ?= -O3
# One binary for every x86-64 CPU: everything is built for the baseline level, and
# the files named *_avx2.c / *_avx512.c (the kernels of one instruction-set level,
# chosen at run time by engine/core/cpu.c) for theirs.
ARCH        ?= -march=x86-64-v2 -mtune=generic
ARCH_AVX2   ?= -march=x86-64-v3 -mtune=generic
ARCH_AVX512 ?= -march=x86-64-v4 -mtune=generic
ARCH_AVX512BF16 ?= -march=x86-64-v4 -mavx512bf16 -mtune=generic
WARN     = -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
BLAS_INC = /usr/include/x86_64-linux-gnu/openblas-openmp
BLAS_LIB = /usr/lib/x86_64-linux-gnu/openblas-openmp
# Open MPI (Debian's libopenmpi-dev), for data-parallel training: only engine/dist/dist.c includes mpi.h.
MPI_INC  = /usr/lib/x86_64-linux-gnu/openmpi/include
MPI_LIB  = /usr/lib/x86_64-linux-gnu/openmpi/lib
CFLAGS  += -std=c11 -D_GNU_SOURCE $(OPT) $(ARCH) $(WARN) -fopenmp -I. -I$(BLAS_INC) -I$(MPI_INC) -MMD -MP
LDLIBS   = -L$(BLAS_LIB) -Wl,-rpath,$(BLAS_LIB) -lopenblas -L$(MPI_LIB) -lmpi -ljansson -lsqlite3 -lmicrohttpd -lm -lpthread
LDFLAGS += -fopenmp

# OpenBLAS reads OPENBLAS_CORETYPE when it loads; a forced older core type halves
# sgemm speed on AVX-512 machines, so nothing run from this Makefile inherits it.
unexport OPENBLAS_CORETYPE OPENBLAS_L2_SIZE

B ?= build
ENGINE_SRC := $(sort $(wildcard engine/*/*.c))
STORE_SRC  := $(sort $(wildcard store/*.c))
SERVER_SRC := $(sort $(wildcard server/*/*.c))
TEST_SRC   := $(sort $(wildcard tests/unit/test_*.c))

ENGINE_OBJ := $(ENGINE_SRC:%.c=$(B)/%.o)
STORE_OBJ  := $(STORE_SRC:%.c=$(B)/%.o)
SERVER_OBJ := $(SERVER_SRC:%.c=$(B)/%.o)
TEST_BIN   := $(TEST_SRC:tests/%.c=$(B)/tests/%)
LIBS       := $(B)/libmaskd-server.a $(B)/libmaskd-store.a $(B)/libmaskd-engine.a

.PHONY: all asan setup setup-tests run test test-unit test-long clean fuzz fuzz-build fuzz-bins fuzz-replay
# Keep object files between builds (they would otherwise be removed as intermediates).
.SECONDARY:
all: $(B)/maskd $(TEST_BIN)

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@
# The later -march wins over $(ARCH)'s.
$(B)/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ARCH_AVX2) -c $< -o $@
$(B)/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ARCH_AVX512) -c $< -o $@
$(B)/%_avx512bf16.o: %_avx512bf16.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ARCH_AVX512BF16) -c $< -o $@

$(B)/libmaskd-engine.a: $(ENGINE_OBJ)
	@mkdir -p $(B); rm -f $@; ar rcs $@ $^
$(B)/libmaskd-store.a: $(STORE_OBJ)
	@mkdir -p $(B); rm -f $@; ar rcs $@ $^
# The server library holds every server/ object but main.c, so tests can call commands.
$(B)/libmaskd-server.a: $(filter-out $(B)/server/cli/main.o,$(SERVER_OBJ))
	@mkdir -p $(B); rm -f $@; ar rcs $@ $^

$(B)/maskd: $(B)/server/cli/main.o $(LIBS)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(B)/tests/%: $(B)/tests/%.o $(LIBS)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

setup:
	bash scripts/setup

setup-tests:
	bash scripts/setup --tests

# Unit tests under AddressSanitizer + UndefinedBehaviorSanitizer, in their own tree.
# With them, the fuzz harnesses linked to a replaying main (tests/fuzz/replay_main.c):
# tests/fuzz/test_fuzz.sh runs every seed and regression input through them.
asan:
	$(MAKE) B=build-asan OPT="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined" \
	        LDFLAGS="-fopenmp -fsanitize=address,undefined" all fuzz-replay

# libFuzzer harnesses (tests/fuzz/fuzz_*.c), one per parser of outside input, built
# with clang under ASan+UBSan into their own tree; `make fuzz` runs each for
# FUZZ_SECONDS (tests/fuzz/run; the short run is tests/fuzz/test_fuzz.sh).
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SRC     := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN     := $(FUZZ_SRC:tests/fuzz/%.c=$(B)/fuzz/%)
FUZZ_REPLAY_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(B)/fuzz-replay/%)
fuzz-replay: $(FUZZ_REPLAY_BIN)
$(B)/fuzz-replay/%: $(B)/tests/fuzz/%.o $(B)/tests/fuzz/replay_main.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@
fuzz-build:
	$(MAKE) B=build-fuzz CC=$(FUZZ_CC) \
	        OPT="-O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -Wno-pass-failed" \
	        LDFLAGS="-fopenmp -fsanitize=fuzzer,address,undefined" fuzz-bins
fuzz-bins: $(FUZZ_BIN)
$(B)/fuzz/%: $(B)/tests/fuzz/%.o $(LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@
fuzz:
	bash tests/fuzz/run --seconds $(FUZZ_SECONDS)

# The builds that test, test-long and run start use every CPU (JOBS): on one job a fresh
# clone's two builds (optimised, sanitizer) took close to 4 of make test's 15 minutes.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

test: setup-tests
	$(MAKE) -j$(JOBS) all
	$(MAKE) -j$(JOBS) asan
	bash tests/run --build $(B) --asan build-asan

test-unit: all
	bash tests/run --build $(B)

test-long: setup-tests
	$(MAKE) -j$(JOBS) all
	$(MAKE) -j$(JOBS) asan
	bash tests/run --build $(B) --long

run: setup
	$(MAKE) -j$(JOBS) all
	bash scripts/run

clean:
	rm -rf build build-asan build-fuzz

-include $(shell find $(B) build-asan -name '*.d' 2>/dev/null)
