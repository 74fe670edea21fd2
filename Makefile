# The two commands of the README:
#   make quickstart   install what is missing, build (Release), run the main job, print results
#   make test         install what is missing, build, run the test suite (ctest)
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: quickstart test deps build bench clean

deps:
	scripts/install-deps.sh

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

# A τ ablation of si+p-rope plus RoPE and ALiBi (sweeps/quickstart.yaml); a rerun resumes and
# skips finished runs.
quickstart: deps build
	$(BUILD)/harness sweep run sweeps/quickstart.yaml --jobs 2 --threads-per-job 1
	@echo
	$(BUILD)/harness sweep table sweeps/quickstart.yaml --csv runs/quickstart/table.csv
	@echo "results: runs/quickstart/<run id>/run.h5 (h5dump -H, or h5py); table: runs/quickstart/table.csv"

test:
	scripts/install-deps.sh --no-corpus
	$(MAKE) --no-print-directory build
	cd $(BUILD) && ctest --output-on-failure --timeout 900

bench: build
	scripts/install-deps.sh --no-corpus --bench
	$(BUILD)/bench_attention

clean:
	rm -rf $(BUILD)
