# The two commands of the README:
#   make quickstart   install what is missing, build (Release), run the main job, print results
#   make test         install what is missing, build, run the test suite (ctest)
# What is missing: Debian's packages, .venv/ (the pinned pip torch whose LibTorch the build links;
# scripts/install-python.sh) and, for the quickstart, the default corpus.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# Ninja for a new build folder; an existing one keeps the generator it was made with.
GENERATOR = $(if $(wildcard $(BUILD)/CMakeCache.txt),,-G Ninja)
# Progress lines only: no "Entering directory" from the make that cmake --build runs.
MAKEFLAGS += --no-print-directory

.PHONY: quickstart test deps build build-harness bench results fuzz clean

deps:
	scripts/install-deps.sh

build:
	cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

# Only the executable (no tests, benchmarks or CUDA test binaries): what the quickstart runs.
build-harness:
	cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j$(JOBS) --target harness_cli

# A τ ablation of si+p-rope plus RoPE and ALiBi (sweeps/quickstart.yaml); a rerun resumes and
# skips finished runs. Ends with the Table-1-style table and the rendered figures (loss_vs_tau,
# entropy_vs_context, ...); the theory overlay is the IID-logit Monte Carlo at the quickstart's
# τ = L/400 = 0.16.
quickstart: deps build-harness
	@$(BUILD)/harness sweep run sweeps/quickstart.yaml --jobs 2 --threads-per-job 1
	@echo
	@$(BUILD)/harness export table sweeps/quickstart.yaml --out runs/quickstart/table.md
	@$(BUILD)/harness export table sweeps/quickstart.yaml --format csv --out runs/quickstart/table.csv >/dev/null 2>&1
	@$(BUILD)/harness theory entropy --quick --tau 0.16 --out runs/theory/entropy-quick.h5 \
	    >runs/quickstart/theory.log 2>&1 || (cat runs/quickstart/theory.log; false)
	@$(BUILD)/harness export curves sweeps/quickstart.yaml --out runs/quickstart/figures \
	    --theory runs/theory/entropy-quick.h5
	@$(BUILD)/harness report sweeps/quickstart.yaml --theory runs/theory/entropy-quick.h5
	@echo "runs: runs/quickstart/<run id>/run.h5 (h5py); tables: runs/quickstart/table.{md,csv};" \
	    "every figure with its CSV: runs/quickstart/figures/; all of it on one page: runs/quickstart/report.html"

test:
	scripts/install-deps.sh --no-corpus
	$(MAKE) --no-print-directory build
	cd $(BUILD) && ctest --output-on-failure --timeout 900 -j$(JOBS)

# The README's performance tables with the machine that produced them (runs/bench/<time>.md).
bench: build
	scripts/install-deps.sh --no-corpus --bench
	scripts/bench.sh $(BUILD)

# docs/results.md: Table 1 (sweeps/table1.yaml) and the τ ablation at CPU scale, with their figures
# tau check's calibration and the law of the best τ against L (about 4 hours on 2 cores; a rerun
# skips finished runs).
results: deps build-harness
	scripts/results.sh $(BUILD)

# libFuzzer on the YAML config/sweep loader and the run.h5 readers (docs/fuzzing.md): a clang
# build with ASan and UBSan in build-fuzz/, FUZZ_SECONDS per target, one target after the other.
# Not part of `make test` or CI. Exit 1 on a finding in our code.
FUZZ_SECONDS ?= 600
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh

clean:
	rm -rf $(BUILD)
